"""Sales summaries from the shop's CSV exports."""

from salesreport.data import build_report, load_sales
from salesreport.model import Report, Row, Sale
from salesreport.render import render

__all__ = ["Report", "Row", "Sale", "build_report", "load_sales", "render"]
