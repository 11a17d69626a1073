"use strict";

module.exports = { ...require("./duration"), ...require("./retry") };
