"""Stage IV: trajectory segments, two-step QA writing, quality control, multiple-choice conversion."""
