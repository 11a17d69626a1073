"""Pure text engines behind edit_file and apply_patch: they take text and return text (or an
error written for the model), never touching the disk, so a caller writes only after a whole
request has been validated."""
