"""Sales summaries from the shop's CSV exports."""

from salesreport import formats
from salesreport.data import build_report, load_sales
from salesreport.model import Report, Row, Sale
from salesreport.render import render  # also registers the built-in formats

__all__ = ["Report", "Row", "Sale", "build_report", "formats", "load_sales", "render"]
