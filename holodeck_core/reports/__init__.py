"""Reports: the EvalRun file (always first), then JSON, Markdown and JUnit renderings."""

from holodeck_core.reports.eval_run_file import write_eval_run
from holodeck_core.reports.junit import render_junit
from holodeck_core.reports.markdown import render_markdown

__all__ = ["render_junit", "render_markdown", "write_eval_run"]
