// Package report is what `lockstep simulate` found, per scheduler (Report:
// its JSON field names are stable, scripts rely on them), and its
// renderings: the table (WriteTable) and the HTML page with its charts
// (WriteHTML). Rendering reads the report alone.
package report
