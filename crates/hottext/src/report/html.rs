//! The page itself: tables and the forest plot written here as HTML and SVG, the heat maps drawn
//! by a small inline script on canvases from the data embedded in the page (a grid of cells
//! scales to 100+ MB of text where one SVG element a page would not).

use std::fmt::Write as _;

use super::{ForestRow, Report};

/// Escapes text for HTML content and attribute values.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d1d1f;max-width:1200px}\
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:8px 0}td,th{padding:2px 10px;text-align:right;border-bottom:1px solid #eee}\
td:first-child,th:first-child{text-align:left}.maps{display:flex;gap:24px;flex-wrap:wrap}\
.map h3{font-size:14px;margin:4px 0}canvas{image-rendering:pixelated;border:1px solid #ccc}\
#tip{position:fixed;pointer-events:none;background:#fff;border:1px solid #888;padding:4px 8px;display:none;font-size:12px;white-space:pre}\
.better{color:#0a7d28}.worse{color:#b3261e}.same{color:#555}.note{color:#555;font-size:12px}";

/// The script: draws each heat map (rows are 2 MiB pages of 512 cells), marks the hot range and
/// the huge pages, and names a page's functions under the pointer. It records what it drew in
/// data attributes, which the tests read back.
const SCRIPT: &str = r#"
const data = JSON.parse(document.getElementById('heat-data').textContent);
const tip = document.getElementById('tip');
const W = 512, CW = 2, CH = 4, X0 = 8, MIN_HEIGHT = 64, MAX_CELL = 24;
function colour(v, max) {
  if (v === 0) return [236, 236, 240];
  const t = Math.log1p(v) / Math.log1p(max);
  const stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  const x = t * (stops.length - 1), i = Math.min(Math.floor(x), stops.length - 2), f = x - i;
  return stops[i].map((c, k) => Math.round(c + f * (stops[i + 1][k] - c)));
}
data.forEach((map, m) => {
  const canvas = document.getElementById('heat-' + m);
  const rows = Math.max(1, Math.ceil(map.pages.length / W));
  // Small text would be a strip a few pixels high: its one row gets wider cells (fitting the
  // pages it has into the usual width) and every map at least MIN_HEIGHT pixels.
  const cols = rows === 1 ? Math.max(1, map.pages.length) : W;
  const cw = Math.min(MAX_CELL, Math.max(CW, Math.floor(W * CW / cols)));
  const ch = Math.max(CH, Math.ceil(MIN_HEIGHT / rows));
  canvas.width = cols * cw + X0; canvas.height = rows * ch;
  const ctx = canvas.getContext('2d');
  const img = ctx.createImageData(canvas.width, canvas.height);
  const max = Math.max(1, map.pages.reduce((a, b) => Math.max(a, b), 0));
  let hot = 0;
  map.pages.forEach((v, p) => {
    if (v > 0) hot++;
    const [r, g, b] = colour(v, max);
    const x0 = X0 + (p % cols) * cw, y0 = Math.floor(p / cols) * ch;
    for (let y = y0; y < y0 + ch - 1; y++) for (let x = x0; x < x0 + cw - (cw > 4 ? 1 : 0); x++) {
      const o = (y * canvas.width + x) * 4;
      img.data[o] = r; img.data[o + 1] = g; img.data[o + 2] = b; img.data[o + 3] = 255;
    }
  });
  ctx.putImageData(img, 0, 0);
  // Left margin: a green bar for a row on a huge page, a red one for the hot range's rows.
  ctx.fillStyle = '#0a7d28';
  map.huge_rows.forEach(r => ctx.fillRect(0, r * ch, 3, ch - 1));
  if (map.hot_range && map.hot_range[1] > map.hot_range[0]) {
    const [s, e] = map.hot_range;
    ctx.fillStyle = '#d00';
    for (let r = Math.floor(s / W); r <= Math.floor((e - 1) / W); r++) ctx.fillRect(4, r * ch, 3, ch - 1);
  }
  canvas.dataset.cells = map.pages.length;
  canvas.dataset.hotCells = hot;
  canvas.dataset.cellWidth = cw; canvas.dataset.cellHeight = ch;
  const names = new Map(map.names);
  canvas.addEventListener('mousemove', ev => {
    const box = canvas.getBoundingClientRect();
    const col = Math.floor((ev.clientX - box.left - X0) / cw), row = Math.floor((ev.clientY - box.top) / ch);
    const p = row * cols + col;
    if (col < 0 || col >= cols || p >= map.pages.length) { tip.style.display = 'none'; return; }
    const addr = '0x' + (map.base + p * 4096).toString(16);
    let text = addr + '  page ' + p + '  2 MiB row ' + row + '\n' + map.pages[p] + ' samples';
    (names.get(p) || []).forEach(([n, s]) => { text += '\n' + (100 * s).toFixed(0) + '%  ' + n; });
    tip.textContent = text; tip.style.display = 'block';
    tip.style.left = (ev.clientX + 14) + 'px'; tip.style.top = (ev.clientY + 14) + 'px';
  });
  canvas.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
});
document.body.dataset.drawn = data.length;
"#;

/// The whole page.
pub fn render(r: &Report) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\
         <title>{title}</title><style>{STYLE}</style></head><body><h1>{title}</h1>\
         <p class=\"note\">Made by hottext {version} from {sources}.</p>",
        title = esc(&r.title),
        version = env!("CARGO_PKG_VERSION"),
        sources = esc(&r.sources.join(", ")),
    );
    heat_maps(&mut h, r);
    figures(&mut h, r);
    forest(&mut h, &r.forest);
    huge_pages(&mut h, r);
    history(&mut h, r);
    let data = script_json(&r.heat_maps);
    let _ = writeln!(
        h,
        "<div id=\"tip\"></div><script type=\"application/json\" id=\"heat-data\">{data}</script>\
         <script>{SCRIPT}</script></body></html>"
    );
    h
}

fn heat_maps(h: &mut String, r: &Report) {
    if r.heat_maps.is_empty() {
        return;
    }
    h.push_str(
        "<h2>Heat map of the text</h2><p class=\"note\">Each cell is a 4 KiB page, each row a 2 MiB \
         page (512 cells; text within one 2 MiB page is one row of wider cells), coloured by the profile's samples (log scale from dark blue to yellow; grey: \
         none). Left margin: red, the rows of the hot range; green, a 2 MiB page a running process \
         had on a huge page. Point at a \
         page for its address and hottest functions.</p><div class=\"maps\">",
    );
    for (i, m) in r.heat_maps.iter().enumerate() {
        let _ = write!(
            h,
            "<div class=\"map\"><h3>{}</h3><p class=\"note\">{} pages of 4 KiB hold 99% of {} samples</p>\
             <canvas id=\"heat-{i}\" class=\"heat\"></canvas></div>",
            esc(&m.title),
            m.pages_99,
            m.samples
        );
    }
    h.push_str("</div>");
}

fn figures(h: &mut String, r: &Report) {
    if !r.figures.is_empty() {
        h.push_str("<h2>Layout figures (modelled from the profile)</h2><table><tr><th>figure</th><th>current</th><th>chosen</th></tr>");
        for (label, before, after) in &r.figures {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(label),
                esc(before),
                esc(after)
            );
        }
        h.push_str("</table>");
    }
    if !r.candidates.is_empty() {
        h.push_str("<h2>Candidate orders (--algorithm auto)</h2><table class=\"candidates\"><tr><th>algorithm</th><th>calls leaving their page</th><th>L1i misses per sample (modelled)</th><th>4 KiB pages for 99%</th><th></th></tr>");
        for (name, score, overflow, pages, chosen) in &r.candidates {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{:.1}%</td><td>{:.4}</td><td>{pages}</td><td>{}</td></tr>",
                esc(name),
                100.0 * score,
                overflow,
                if *chosen { "chosen" } else { "" }
            );
        }
        h.push_str("</table>");
    }
}

/// The A/B results: a forest plot of B/A for the figures that score the layout (each with its
/// direction, the point coloured by B's verdict), then a table of every figure, with why a
/// figure is not plotted.
fn forest(h: &mut String, rows: &[ForestRow]) {
    if rows.is_empty() {
        return;
    }
    h.push_str("<h2>A/B results</h2>");
    let plotted: Vec<&ForestRow> = rows.iter().filter(|r| r.left_out.is_none()).collect();
    forest_plot(h, &plotted);
    forest_table(h, rows);
}

/// The colour class of a verdict: B better, B worse, or neither.
fn verdict_class(verdict: &str) -> &'static str {
    match verdict {
        v if v.starts_with("b-better") => "better",
        v if v.starts_with("b-worse") => "worse",
        _ => "same",
    }
}

fn direction(better: &str) -> &'static str {
    match better {
        "higher" => "higher is better",
        "lower" => "lower is better",
        _ => "neither better nor worse",
    }
}

fn forest_plot(h: &mut String, rows: &[&ForestRow]) {
    if rows.is_empty() {
        h.push_str("<p class=\"note\">No figure to plot (see the table).</p>");
        return;
    }
    let (lo, hi) = rows
        .iter()
        .filter_map(|r| r.ratio)
        .fold((1.0f64, 1.0f64), |(lo, hi), (_, low, high)| {
            (lo.min(low), hi.max(high))
        });
    let (lo, hi) = ((lo.max(1e-3) / 1.05).ln(), (hi.min(1e3) * 1.05).ln());
    let (left, width, row_h) = (400.0, 360.0, 22.0);
    let x = |v: f64| left + (v.clamp(1e-3, 1e3).ln() - lo) / (hi - lo) * width;
    let height = row_h * rows.len() as f64 + 30.0;
    let _ = write!(
        h,
        "<p class=\"note\">B/A per figure: the median of per-round ratios with its 95% interval \
         (simulated figures: the spread over hot-range offsets); log axis, the line at 1 is no change. \
         Each figure says which way is better; the point is green where B is better, red where it \
         is worse.</p><svg class=\"forest\" width=\"{w}\" height=\"{height}\" \
         xmlns=\"http://www.w3.org/2000/svg\" font-size=\"12\">\
         <line x1=\"{one}\" x2=\"{one}\" y1=\"0\" y2=\"{axis}\" stroke=\"#999\" stroke-dasharray=\"3 3\"/>\
         <text x=\"{one}\" y=\"{label_y}\" text-anchor=\"middle\">1</text>",
        w = left + width + 340.0,
        one = x(1.0),
        axis = height - 24.0,
        label_y = height - 8.0
    );
    for (i, r) in rows.iter().enumerate() {
        let y = row_h * i as f64 + 14.0;
        let class = verdict_class(&r.verdict);
        let _ = write!(
            h,
            "<g class=\"forest-row\" data-better=\"{}\"><text x=\"0\" y=\"{}\">{}: {} ({})</text>",
            esc(&r.better),
            y + 4.0,
            esc(&r.source),
            esc(&r.label),
            direction(&r.better)
        );
        let figures = match r.ratio {
            Some((median, low, high)) => {
                let _ = write!(
                    h,
                    "<line x1=\"{}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\" stroke=\"#333\"/>\
                     <circle cx=\"{}\" cy=\"{y}\" r=\"4\" class=\"{class}\" fill=\"currentColor\"/>",
                    x(low),
                    x(high),
                    x(median)
                );
                format!("{median:.3} [{low:.3}, {high:.3}]")
            }
            None => "no ratio".to_string(),
        };
        let _ = write!(
            h,
            "<text x=\"{}\" y=\"{}\" class=\"{class}\" fill=\"currentColor\">{figures} {}</text></g>",
            left + width + 10.0,
            y + 4.0,
            esc(&r.verdict.replace('-', " "))
        );
    }
    h.push_str("</svg>");
}

/// Every figure of the comparisons, plotted or not: what `ab`'s own table shows.
fn forest_table(h: &mut String, rows: &[ForestRow]) {
    let value = |v: Option<f64>, unit: &str| match v {
        Some(v) => format!("{v:.4} {unit}"),
        None => "-".into(),
    };
    h.push_str(
        "<table class=\"ab\"><tr><th>comparison</th><th>figure</th><th>better</th><th>A</th>\
         <th>B</th><th>B/A [interval]</th><th>verdict</th><th>plot</th></tr>",
    );
    for r in rows {
        let ratio = match r.ratio {
            Some((m, lo, hi)) => format!("{m:.3} [{lo:.3}, {hi:.3}]"),
            None => "-".into(),
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{ratio}</td>\
             <td class=\"{}\">{}</td><td>{}</td></tr>",
            esc(&r.source),
            esc(&r.label),
            esc(&r.better),
            esc(&value(r.a, &r.unit)),
            esc(&value(r.b, &r.unit)),
            verdict_class(&r.verdict),
            esc(&r.verdict.replace('-', " ")),
            esc(r.left_out.as_deref().unwrap_or("plotted"))
        );
    }
    h.push_str("</table>");
}

fn huge_pages(h: &mut String, r: &Report) {
    if r.huge_pages.is_empty() {
        return;
    }
    let huge = r.huge_pages.iter().filter(|(_, b)| b != "small").count();
    let _ = write!(
        h,
        "<h2>Huge pages of the running process</h2><p>{huge} of {} 2 MiB pages of the hot range on huge pages.</p>\
         <table><tr><th>address</th><th>backed by</th></tr>",
        r.huge_pages.len()
    );
    for (address, backing) in &r.huge_pages {
        let _ = write!(h, "<tr><td>{address:#x}</td><td>{}</td></tr>", esc(backing));
    }
    h.push_str("</table>");
}

fn history(h: &mut String, r: &Report) {
    if r.history.is_empty() {
        return;
    }
    h.push_str("<h2>Profile history (pipeline commits of the meta file)</h2><table><tr><th>commit</th><th>date</th><th>samples</th><th>previous profile</th><th>coverage</th><th>drift</th><th>top movers</th></tr>");
    for row in &r.history {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&row.commit),
            esc(&row.date),
            esc(&row.samples),
            esc(&row.previous),
            esc(&row.coverage),
            esc(&row.drift),
            esc(&row.movers)
        );
    }
    h.push_str("</table>");
}

/// `value` as JSON that a `<script>` element holds whole: every `<` (only ever inside a JSON
/// string) written `\u003c`, so that no name (`</script>`, `<!--<script>`) can end the
/// element early or switch the HTML parser into a state that swallows the rest of the page.
fn script_json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value)
        .unwrap_or_else(|_| "[]".into())
        .replace('<', "\\u003c")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_break_out_of_the_page() {
        let mut r = Report {
            title: "<script>alert(1)</script>".into(),
            ..Report::default()
        };
        r.figures.push(("a\"b".into(), "<x>".into(), "&".into()));
        let page = render(&r);
        assert!(!page.contains("<script>alert"));
        assert!(page.contains("&lt;x&gt;") && page.contains("a&quot;b"));
    }

    #[test]
    fn embedded_json_has_no_angle_bracket_and_reads_back_the_same() {
        let names = vec!["<!--<script>".to_string(), "</script><b>".to_string()];
        let json = script_json(&names);
        assert!(!json.contains('<'), "{json}");
        let back: Vec<String> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, names);
    }
}
