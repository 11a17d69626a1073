export { fmtMoney, parseMoney, percentOf, sum, currencyInfo } from "./money.js";
export { cartSummary, cartTotals, lineTotal } from "./cart.js";
export { applyDiscounts, describeDiscount } from "./discounts.js";
export { quoteShipping } from "./shipping.js";
export { renderInvoice, taxLines, invoiceTotal } from "./invoice.js";
export { renderReceipt } from "./receipt.js";
export { refundFor } from "./refunds.js";
export { orderConfirmation } from "./email/order-confirmation.js";
