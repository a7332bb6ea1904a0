"""Human-readable reports of results (plain-text tables now; plots and HTML later)."""

from fairshare.report.table import fmt_number, fmt_percent, fmt_tasks, format_allocation, render_table

__all__ = ["fmt_number", "fmt_percent", "fmt_tasks", "format_allocation", "render_table"]
