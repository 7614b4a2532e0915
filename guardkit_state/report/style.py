"""The report's only style sheet, inlined in the page (no fonts, images or anything else to load)."""

from __future__ import annotations

CSS = """
:root{--ok:#1a7f37;--ok-bg:#dafbe1;--imp:#4d7c0f;--imp-bg:#f0f9e0;--bad:#cf222e;--bad-bg:#ffebe9;
--warn:#9a6700;--warn-bg:#fff8c5;--dim:#6e7781;--pend-bg:#f6f8fa;--line:#d0d7de;--ink:#1f2328}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:var(--ink);
margin:0;padding:20px 24px;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 8px}h4{margin:10px 0 4px;font-size:13px}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.facts{margin:0 0 4px}.facts b{font-weight:600}.dim{color:var(--dim)}
.next{margin:0;color:var(--dim)}
ul.notes{margin:8px 0 0;padding-left:18px;color:var(--warn);font-size:12px}
.scroll{overflow-x:auto;border:1px solid var(--line);border-radius:6px}
table{border-collapse:collapse;width:max-content;min-width:100%}
th,td{border-bottom:1px solid var(--line);padding:6px 10px;text-align:left;vertical-align:top}
tbody tr:last-child th,tbody tr:last-child td{border-bottom:0}
th[scope=row]{background:#f6f8fa;font-weight:600;white-space:nowrap;position:sticky;left:0;z-index:1}
table.timeline td,table.timeline thead th{width:220px;max-width:220px;border-left:1px solid var(--line)}
thead th{background:#f6f8fa;font-weight:600}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;border:1px solid}
.d-approve{color:var(--ok);background:var(--ok-bg);border-color:var(--ok)}
.d-feedback{color:var(--warn);background:var(--warn-bg);border-color:var(--warn)}
.d-reject,.d-error{color:var(--bad);background:var(--bad-bg);border-color:var(--bad)}
.p-implemented{color:var(--ok)}.p-failed,.p-blocked{color:var(--bad)}.p-unknown{color:var(--dim)}
thead th.turn.d-approve{border-top:4px solid var(--ok)}thead th.turn.d-feedback{border-top:4px solid var(--warn)}
thead th.turn.d-reject,thead th.turn.d-error{border-top:4px solid var(--bad)}
thead th.turn{background:#fff;border-width:0 0 1px 1px;color:var(--ink)}
.delta{font-size:12px}.delta .up{color:var(--ok)}.delta .down{color:var(--bad);font-weight:600}
ul.gates,ul.plain{list-style:none;margin:0;padding:0}
ul.gates li{font-size:12px;white-space:nowrap}
.g-pass{color:var(--ok)}.g-fail{color:var(--bad);font-weight:600}.g-none{color:var(--dim)}
details summary{cursor:pointer;color:#0969da;font-size:12px}
.text{white-space:pre-wrap;overflow-wrap:anywhere;margin:0;font-size:12px}
ul.items{margin:0;padding-left:16px;font-size:12px;overflow-wrap:anywhere}
.sev{font-size:11px;text-transform:uppercase;color:var(--dim)}
table.matrix td{text-align:center;min-width:84px;border-left:1px solid var(--line);font-size:12px}
table.matrix th.crit{max-width:520px;white-space:normal;font-weight:400}
.cid{font-weight:600;margin-right:6px}
td.cell .sym{display:block;font-size:16px;line-height:1.1}
.s-verified{background:var(--ok-bg);color:var(--ok)}
.s-implied{background:var(--imp-bg);color:var(--imp)}
.s-rejected{background:var(--bad-bg);color:var(--bad)}
.s-pending{background:var(--pend-bg);color:var(--dim)}
td.changed{box-shadow:inset 0 0 0 2px currentColor;font-weight:600}
td.regression{box-shadow:inset 0 0 0 2px var(--bad);
background:repeating-linear-gradient(135deg,var(--bad-bg) 0 6px,#fff 6px 9px)}
.legend{font-size:12px;color:var(--dim);margin:6px 0 0}
.legend span{display:inline-block;padding:0 6px;margin-right:8px;border-radius:4px}
footer{margin-top:22px;font-size:11px;color:var(--dim)}
"""

#: What only a feature's page adds: the waves × tasks grid, the turn chips, the task sections.
#: The grid is as wide as the window allows: task names and turn chips wrap in their cells, so a task
#: of 25 turns does not push the columns to its right out of sight.
FEATURE_CSS = """
table.grid td,table.grid th{white-space:nowrap}
table.grid td.blocked{white-space:normal;max-width:260px;overflow-wrap:anywhere}
table.grid tr.wave-head th{background:#eef1f4;font-weight:600;position:static}
.st-completed{color:var(--ok);background:var(--ok-bg);border-color:var(--ok)}
.st-approved{color:var(--imp);background:var(--imp-bg);border-color:var(--imp)}
.st-failed,.st-blocked{color:var(--bad);background:var(--bad-bg);border-color:var(--bad)}
.st-running,.st-in_progress{color:var(--warn);background:var(--warn-bg);border-color:var(--warn)}
.st-pending,.st-skipped,.st-other{color:var(--dim);background:var(--pend-bg);border-color:var(--line)}
table.grid{width:auto}table.grid td.timeline{white-space:normal;min-width:120px}
table.grid th[scope=row]{white-space:normal;min-width:160px}
.chips{display:flex;gap:3px;flex-wrap:wrap;max-width:340px}
.chip{display:inline-block;min-width:22px;padding:0 5px;border-radius:4px;border:1px solid;font-size:11px;
text-align:center;text-decoration:none}
.chip.running{color:var(--warn);border-style:dashed}
section.task{border-top:2px solid var(--line);margin-top:28px;padding-top:4px}
section.task h2{font-size:17px}section.task h3{font-size:14px;margin:16px 0 6px}
a{color:#0969da}
"""
