// Run viewer: builds the overview and, on demand, one prompt's page from the embedded JSON.
// Every piece of data reaches the DOM as a text node or an attribute value, never as markup.
"use strict";

const DATA = JSON.parse(document.getElementById("view-data").textContent);
const METRIC = Object.fromEntries(DATA.metrics.map((m) => [m.key, m]));
const COLUMN_METRICS = DATA.metrics.filter((m) => m.overview);
const STORIES_OF = DATA.prompts.map(() => []);
DATA.stories.forEach((s) => STORIES_OF[s.prompt].push(s));
const FAILED = {};  // "run|prompt index" -> reason of the last failed attempt, while it still fails
DATA.failures.forEach((f) => { if (f.prompt != null && !f.retried_ok) FAILED[f.run + "|" + f.prompt] = f.reason; });

function svg(tag, attrs, ...kids) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const kid of kids) el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  return el;
}

const fmt = (v, digits) => (v == null ? "—" : v.toFixed(digits));
const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);

// ---------- overview ----------

// One cell per (prompt, run, metric): the mean over the prompt's stories in that run, or why not.
function cellOf(p, run, key) {
  const mine = STORIES_OF[p].filter((s) => s.run === run);
  if (!mine.length) {
    const reason = FAILED[run + "|" + p];
    return reason ? { value: null, text: "failed", why: reason } : { value: null, text: "", why: "not in this run" };
  }
  const values = mine.map((s) => s.scores[key]).filter((v) => v != null);
  if (!values.length) {
    const why = [...new Set(mine.map((s) => s.missing[key] || s.missing["*"] || "not recorded"))].join("; ");
    return { value: null, text: "missing", why };
  }
  const v = mean(values);
  return { value: v, text: fmt(v, METRIC[key].digits), why: values.length < mine.length ? `${mine.length - values.length} of ${mine.length} stories missing` : null };
}

function buildColumns() {
  const cols = [
    { id: "id", label: "Prompt id", get: (p) => DATA.prompts[p].id },
    { id: "aspect", label: "Aspect", get: (p) => DATA.prompts[p].aspect },
    { id: "text", label: "Prompt", get: (p) => DATA.prompts[p].text },
  ];
  DATA.runs.forEach((run, r) => COLUMN_METRICS.forEach((m) => cols.push({
    id: `${r}:${m.key}`, run: r, metric: m, label: m.label, numeric: true, cells: DATA.prompts.map((_, p) => cellOf(p, r, m.key)),
  })));
  cols.forEach((c) => { if (c.cells) c.get = (p) => c.cells[p].value; });
  return cols;
}

const state = { sort: null, dir: 1, aspect: "", query: "", order: [] };
let COLUMNS, ROWS, HAYSTACK = null;

function sortedFiltered() {
  const q = state.query.toLowerCase();
  if (q && !HAYSTACK) {
    HAYSTACK = DATA.prompts.map((p, i) => [p.id, p.text, ...STORIES_OF[i].map((s) => s.text)].join("\n").toLowerCase());
  }
  let rows = DATA.prompts.map((_, i) => i).filter((i) =>
    (!state.aspect || DATA.prompts[i].aspect === state.aspect) && (!q || HAYSTACK[i].includes(q)));
  const col = COLUMNS.find((c) => c.id === state.sort);
  if (col) {
    const cmp = col.numeric ? (a, b) => a - b : (a, b) => a.localeCompare(b);
    rows = rows.sort((a, b) => {
      const x = col.get(a), y = col.get(b);
      if (x == null || y == null) return (x == null) - (y == null);  // missing values last either way
      return state.dir * cmp(x, y) || a - b;
    });
  }
  return rows;
}

function updateRows() {
  state.order = sortedFiltered();
  document.getElementById("prompt-rows").replaceChildren(...state.order.map((i) => ROWS[i]));
  document.getElementById("row-count").textContent = `${state.order.length} of ${DATA.prompts.length} prompts`;
  for (const th of document.querySelectorAll("#prompts th[data-col]")) {
    const on = th.dataset.col === state.sort;
    th.setAttribute("aria-sort", on ? (state.dir > 0 ? "ascending" : "descending") : "none");
  }
}

function promptTable() {
  COLUMNS = buildColumns();
  const groups = h("tr", {}, h("th", { colspan: 3 }, ""),
    DATA.runs.map((run) => h("th", { colspan: COLUMN_METRICS.length, class: "group", title: run.dir }, `${run.label} (${run.framework})`)));
  const heads = h("tr", {}, COLUMNS.map((c) => h("th", { "data-col": c.id, class: c.numeric ? "num" : null },
    h("button", { type: "button", title: c.metric ? `${c.metric.label}: ${c.metric.higher_is_better ? "higher" : "lower"} is better` : null,
      on: { click: () => { state.dir = state.sort === c.id ? -state.dir : (c.numeric ? -1 : 1); state.sort = c.id; updateRows(); } } }, c.label))));
  ROWS = DATA.prompts.map((p, i) => h("tr", { "data-prompt": i, on: { click: (e) => { if (!e.target.closest("a")) location.hash = `#prompt/${i}`; } } },
    h("td", {}, p.id), h("td", {}, p.aspect), h("td", { class: "prompt-text" }, h("a", { href: `#prompt/${i}` }, p.text)),
    COLUMNS.filter((c) => c.cells).map((c) => {
      const cell = c.cells[i];
      return h("td", { class: `num${cell.value == null ? " missing" : ""}`, title: cell.why }, cell.text);
    })));
  return h("table", { id: "prompts" }, h("thead", {}, groups, heads), h("tbody", { id: "prompt-rows" }));
}

function controls() {
  const aspects = [...new Set(DATA.prompts.map((p) => p.aspect))].sort();
  let timer;
  return h("div", { class: "controls" },
    h("label", {}, "Aspect ", h("select", { id: "aspect-filter", on: { change: (e) => { state.aspect = e.target.value; updateRows(); } } },
      h("option", { value: "" }, "all"), aspects.map((a) => h("option", { value: a }, a)))),
    h("label", {}, "Search ", h("input", { id: "search", type: "search", placeholder: "prompt or story text",
      on: { input: (e) => { clearTimeout(timer); timer = setTimeout(() => { state.query = e.target.value.trim(); updateRows(); }, 120); } } })),
    h("span", { id: "row-count" }));
}

function summaryCell(s, digits) {
  if (!s || s.mean == null) return "n/a";
  return s.std == null ? s.mean.toFixed(digits) : `${s.mean.toFixed(digits)} ± ${s.std.toFixed(digits)}`;
}

function summaryTable() {
  const metrics = DATA.metrics.filter((m) => m.summary);
  const missing = [];
  const rows = DATA.runs.map((run) => h("tr", {}, h("th", {}, run.label), h("td", {}, run.framework), h("td", {}, run.model || "?"),
    h("td", { class: "num" }, `${run.n_scored}/${run.n_stories}`), h("td", {}, run.judge_mode || "—"),
    metrics.map((m) => {
      const s = run.summary[m.key];
      const lost = Object.entries((s && s.missing) || {});
      if (lost.length) missing.push(`${run.label}, ${m.label}: ` + lost.map(([why, n]) => `${n} × ${why}`).join("; "));
      return h("td", { class: "num", title: s && s.se != null ? `se ${s.se.toFixed(m.digits)}, n ${s.n}` : null }, summaryCell(s, m.digits));
    })));
  return [
    h("div", { class: "scroll" }, h("table", { id: "summary" }, h("thead", {}, h("tr", {}, ["Run", "Framework", "Writer", "Scored", "Judge mode"].map((t) => h("th", {}, t)),
      metrics.map((m) => h("th", { class: "num" }, m.label)))), h("tbody", {}, rows))),
    h("p", { class: "note" }, "Cells: mean ± std over stories (homogenization: over prompts); hover for the standard error and n."),
    missing.length ? h("details", {}, h("summary", {}, `Missing values (${missing.length})`), h("ul", {}, missing.map((t) => h("li", {}, t)))) : null,
  ];
}

function failuresSection() {
  if (!DATA.failures.length) return null;
  const keys = ["prompt_id", "attempt", "agent", "role", "phase", "reasks", "reason"];
  return h("section", { id: "failures" }, h("h2", {}, `Failed prompts (${DATA.failures.length} attempts)`),
    h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Run"), keys.map((k) => h("th", {}, k)), h("th", {}, "status"))),
      h("tbody", {}, DATA.failures.map((f) => h("tr", {}, h("td", {}, DATA.runs[f.run].label), keys.map((k) => h("td", {}, f[k] ?? "")),
        h("td", {}, f.retried_ok ? "succeeded on a later attempt" : "still failed"))))));
}

// The verdict lines are Markdown (comparison.md): **bold** and `code`, turned into elements, never parsed as HTML.
function inlineMarkdown(text) {
  return text.split(/(\*\*[^*]+\*\*|`[^`]+`)/).map((part) =>
    part.startsWith("**") && part.length > 4 ? h("b", {}, part.slice(2, -2)) : part.startsWith("`") && part.length > 2 ? h("code", {}, part.slice(1, -1)) : part);
}

function comparisonSection() {
  const c = DATA.comparison;
  if (!c) return null;
  const label = (m) => (c.metrics[m] && c.metrics[m].label) || m;
  const g3 = (x, digits = 3) => String(Number(x.toPrecision(digits)));  // Python's format(x, ".3g"), as comparison.md
  const signed = (x) => (x == null ? "—" : (x >= 0 ? "+" : "") + g3(x));
  const level = `${100 * (1 - c.config.alpha)}%`;
  const adjusted = c.correction ? c.correction.label : "adjusted";  // comparisons written before the correction have none
  const gains = [];
  for (const [metric, byRun] of Object.entries(c.gains)) {
    for (const [run, g] of Object.entries(byRun)) {
      gains.push(h("tr", { class: g.significant ? "significant" : null }, h("td", {}, label(metric)), h("td", {}, run), h("td", { class: "num" }, signed(g.gain)),
        h("td", { class: "num" }, g.gain == null ? "—" : `[${signed(g.ci_low)}, ${signed(g.ci_high)}]`),
        h("td", { class: "num" }, g.p_value == null ? "—" : g3(g.p_value, 2)),
        h("td", { class: "num" }, g.p_adjusted == null ? "—" : g3(g.p_adjusted, 2)), h("td", { class: "num" }, g.n_pairs),
        h("td", { class: "num" }, (g.missing || []).length), h("td", {}, g.significant ? "yes" : "no")));
    }
  }
  const prec = (x) => (x == null ? "—" : g3(x));
  const cost = Object.entries(c.cost || {}).map(([run, k]) => h("tr", {}, h("td", {}, run), k == null ? h("td", { colspan: 5 }, "unknown") : [
    h("td", { class: "num" }, prec(k.calls)), h("td", { class: "num" }, k.total_tokens == null ? "—" : Math.round(k.total_tokens).toLocaleString("en")),
    h("td", { class: "num" }, prec(k.seconds)), h("td", { class: "num" }, fmt(k.x_base.calls, 2)), h("td", { class: "num" }, fmt(k.x_base.total_tokens, 2))]));
  return h("section", { id: "comparison" }, h("h2", {}, `Comparison with ${c.config.base}`),
    h("p", { class: "note" }, `Gain = run − ${c.config.base}, paired by prompt; ${level} paired bootstrap CI; p: Wilcoxon signed-rank; ` +
      (c.correction ? `p (${adjusted}): adjusted over the comparison's tests (${c.correction.promise}); ` : "") +
      `prompts compared: ${c.prompts.n_common}.`),
    h("ul", { class: "verdict" }, c.verdict.map((v) => h("li", {}, inlineMarkdown(v)))),
    h("table", { id: "gains" }, h("thead", {}, h("tr", {}, ["metric", "run", "gain", `${level} CI`, "p", `p (${adjusted})`, "prompts", "missing", "significant"].map((t) => h("th", {}, t)))), h("tbody", {}, gains)),
    h("h3", {}, "Inference cost per prompt"),
    h("table", { id: "cost" }, h("thead", {}, h("tr", {}, ["run", "calls", "total tokens", "seconds", "calls × base", "tokens × base"].map((t) => h("th", {}, t)))), h("tbody", {}, cost)),
    h("div", { class: "plots" }, c.plots.map((p) => h("img", { src: p.src, alt: p.title, title: p.title }))));
}

function renderOverview() {
  const plots = DATA.plots.length ? h("details", { class: "plots-box" }, h("summary", {}, `Plots (${DATA.plots.length})`),
    h("div", { class: "plots" }, DATA.plots.map((p) => h("figure", {}, h("img", { src: p.src, alt: p.title }), h("figcaption", {}, p.title))))) : null;
  document.getElementById("overview").replaceChildren(...[
    h("h2", {}, "Runs"), summaryTable(), plots, comparisonSection(), failuresSection(),
    h("h2", {}, "Prompts"), controls(), h("div", { class: "scroll" }, promptTable())].flat(Infinity).filter(Boolean));
  updateRows();
}

// ---------- word diff ----------

const MAX_CELLS = 4e6;  // LCS table size above which a pair of versions is shown whole, not diffed

// Tokens are words with their trailing whitespace, compared by the word alone; between two
// unchanged words all removed text comes first, then all added text, so a rewrite reads as one.
function diffWords(a, b) {
  const x = a.match(/\s+|\S+\s*/g) || [], y = b.match(/\s+|\S+\s*/g) || [];
  const kx = x.map((t) => t.trimEnd()), ky = y.map((t) => t.trimEnd());
  let lo = 0, hx = x.length, hy = y.length;
  while (lo < hx && lo < hy && kx[lo] === ky[lo]) lo++;
  while (hx > lo && hy > lo && kx[hx - 1] === ky[hy - 1]) { hx--; hy--; }
  const n = hx - lo, m = hy - lo, ops = [["=", y.slice(0, lo).join(""), ""]];
  const put = (op, t) => {
    const last = ops[ops.length - 1];
    if (op === "=") { if (last[0] === "=") last[1] += t; else ops.push(["=", t, ""]); }
    else if (last[0] === "~") last[op === "-" ? 1 : 2] += t;
    else ops.push(["~", op === "-" ? t : "", op === "+" ? t : ""]);
  };
  if (n * m > MAX_CELLS) {
    put("-", x.slice(lo, hx).join("")); put("+", y.slice(lo, hy).join(""));
  } else {
    const w = m + 1, L = new Uint32Array((n + 1) * w);  // L[i*w+j]: LCS length of kx[lo+i..] and ky[lo+j..]
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        L[i * w + j] = kx[lo + i] === ky[lo + j] ? L[(i + 1) * w + j + 1] + 1 : Math.max(L[(i + 1) * w + j], L[i * w + j + 1]);
      }
    }
    let i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && kx[lo + i] === ky[lo + j]) { put("=", y[lo + j]); i++; j++; }
      else if (j < m && (i === n || L[i * w + j + 1] >= L[(i + 1) * w + j])) { put("+", y[lo + j]); j++; }
      else { put("-", x[lo + i]); i++; }
    }
  }
  put("=", y.slice(hy).join(""));
  return ops.flatMap(([op, t, added]) => (op === "=" ? [["=", t]] : [["-", t], ["+", added]])).filter(([, t]) => t);
}

function diffNode(a, b) {
  return h("div", { class: "text diff" }, diffWords(a, b).map(([op, t]) => (op === "=" ? t : h(op === "+" ? "ins" : "del", {}, t))));
}

// ---------- prompt page ----------

function scoreTable(story, run) {
  const cells = DATA.metrics.map((m) => {
    const v = story.scores[m.key], why = story.missing[m.key] || story.missing["*"];
    const human = story.human && story.human[m.key];  // a rating study's consensus, beside the judge's score
    const note = human ? h("span", { class: "human", title: human.n ? `mean of ${human.n} raters` : null }, ` · human ${fmt(human.mean, 2)}`) : null;
    return [h("th", {}, m.label), v == null ? h("td", { class: "missing", "data-metric": m.key }, "missing: " + (why || "not recorded"), note)
      : h("td", { class: "num", "data-metric": m.key }, fmt(v, m.digits), note)];
  });
  const rows = [];  // two metrics a row, to keep a story's card short
  for (let i = 0; i < cells.length; i += 2) rows.push(h("tr", {}, cells.slice(i, i + 2)));
  const j = story.judge, notes = [];
  if (j) {
    const n = Object.entries(j.n_samples || {}).map(([a, k]) => `${(METRIC[a] || { label: a }).label} ${k}`).join(", ");
    notes.push(`judge (${run.judge_mode || "?"} mode): ${j.requests} replies, ${j.parse_failures} parse failures, ` +
      `${j.backend_failures} lost to the backend; valid judgements per aspect: ${n}`);
  }
  const replies = Object.entries(story.judge_replies || {}).map(([a, texts]) =>
    h("details", { class: "replies" }, h("summary", {}, `judge replies, ${(METRIC[a] || { label: a }).label} (${texts.length})`),
      texts.map((t) => h("pre", { class: "reply" }, t))));
  if (story.notes) notes.push("sanitised: " + [].concat(story.notes).join("; "));
  const u = story.usage;
  if (u) notes.push(`cost of this agent: ${u.calls ?? "?"} calls, ${u.prompt_tokens ?? "?"} prompt + ${u.completion_tokens ?? "?"} completion tokens`);
  return [h("table", { class: "scores" }, h("tbody", {}, rows)), notes.map((t) => h("p", { class: "note" }, t)), replies];
}

// The writer saw Review feedback numbered in order ("Reviewer 1..N", generate/frameworks/review.py
// feedback_block); other frameworks pass the text as it is.
const seenAs = (run, i) => (DATA.runs[run].framework === "review" ? `Reviewer ${i + 1}` : null);

function reviewGraph(stories, round, run) {
  const agents = stories.map((s) => s.agent), R = 62, CX = 120, CY = 108, id = `arrow-${run}-${round}`;
  const angle = (k) => -Math.PI / 2 + (2 * Math.PI * k) / agents.length;
  const pos = Object.fromEntries(agents.map((a, k) => [a, [CX + R * Math.cos(angle(k)), CY + R * Math.sin(angle(k))]]));
  const g = svg("svg", { viewBox: "0 0 240 215", class: "graph", role: "img", "aria-label": `who reviewed whom, round ${round + 1}` },
    svg("defs", {}, svg("marker", { id, viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      svg("path", { d: "M0,0 L10,5 L0,10 z" }))));
  stories.forEach((target) => (target.feedback[round] || []).forEach((item, i) => {
    const [x1, y1] = pos[item.from] || [CX, CY], [x2, y2] = pos[target.agent];
    const dx = x2 - x1, dy = y2 - y1, len = Math.hypot(dx, dy) || 1, ux = dx / len, uy = dy / len;
    const [sx, sy, ex, ey] = [x1 + ux * 16, y1 + uy * 16, x2 - ux * 16, y2 - uy * 16];
    const [mx, my] = [(sx + ex) / 2 - uy * 14, (sy + ey) / 2 + ux * 14];  // bend right, so a→b and b→a part
    const label = seenAs(run, i) || "feedback";
    g.append(svg("path", { d: `M${sx},${sy} Q${mx},${my} ${ex},${ey}`, class: "edge", "marker-end": `url(#${id})`, "data-from": item.from, "data-to": target.agent },
      svg("title", {}, `${item.from} → ${target.agent} (seen as ${label})`)));
    g.append(svg("text", { x: mx, y: my, class: "edge-label" }, label.replace("Reviewer ", "R")));
  }));
  agents.forEach((a, k) => {  // names outside the circle, away from the edges
    const [x, y] = pos[a];
    g.append(svg("circle", { cx: x, cy: y, r: 15, class: "node" }),
      svg("text", { x: x + 30 * Math.cos(angle(k)), y: y + 30 * Math.sin(angle(k)) + 4, class: "node-label" }, a));
  });
  return h("figure", { class: "graph-box" }, g, h("figcaption", {}, `Round ${round + 1}: reviewer → target (label: how the target saw it)`));
}

function feedbackRound(story, round) {
  return h("div", { class: "feedback", "data-round": round + 1 }, h("h5", {}, `Feedback received in round ${round + 1}`),
    (story.feedback[round] || []).map((item, i) => {
      const seen = seenAs(story.run, i);
      return h("blockquote", { class: "feedback-item", "data-from": item.from, "data-to": story.agent, "data-seen-as": seen },
        h("div", { class: "sender" }, seen ? `${seen} (as ${story.agent} saw it) — real sender: ` : "from: ", h("b", {}, item.from), ` → ${story.agent}`),
        h("div", { class: "text" }, item.text));
    }));
}

function history(story) {
  const versions = [...(story.drafts || []), story.text];
  const body = [h("div", { class: "version", "data-version": 1 }, h("h5", {}, versions.length > 1 ? "Version 1 (first draft)" : "Final (only version)"), h("div", { class: "text" }, versions[0]))];
  for (let k = 1; k < versions.length; k++) {
    if (story.feedback && story.feedback[k - 1]) body.push(feedbackRound(story, k - 1));
    body.push(h("div", { class: "version", "data-version": k + 1 }, h("h5", {}, `Version ${k + 1}${k === versions.length - 1 ? " (final)" : ""}: changes from version ${k}`), diffNode(versions[k - 1], versions[k])));
  }
  return h("details", { class: "history", open: true, "data-agent": story.agent },
    h("summary", {}, `${story.agent}: ${versions.length} version(s), ${(story.feedback || []).length} feedback round(s)`), body);
}

function renderPrompt(p) {
  const prompt = DATA.prompts[p], pos = state.order.indexOf(p);
  const link = (i, t) => (i == null || i < 0 ? h("span", { class: "disabled" }, t) : h("a", { href: `#prompt/${i}` }, t));
  const runs = DATA.runs.map((run, r) => ({ run, r, stories: STORIES_OF[p].filter((s) => s.run === r) }));
  const finals = runs.map(({ run, r, stories }) => h("div", { class: "run-col", "data-run": run.label }, h("h3", {}, `${run.label} (${run.framework})`),
    stories.length ? stories.map((s) => h("article", { class: "story", "data-agent": s.agent }, h("h4", {}, s.agent), h("div", { class: "text final" }, s.text), scoreTable(s, run)))
      : h("p", { class: "missing" }, FAILED[r + "|" + p] ? "failed: " + FAILED[r + "|" + p] : "no story for this prompt")));
  const histories = runs.filter(({ stories }) => stories.some((s) => (s.drafts || []).length || (s.feedback || []).length))
    .map(({ run, r, stories }) => {
      const rounds = Math.max(0, ...stories.map((s) => (s.feedback || []).length));
      const graphs = run.framework === "review" ? [...Array(rounds).keys()].map((k) => reviewGraph(stories, k, r)) : [];
      return h("section", { class: "run-history", "data-run": run.label }, h("h3", {}, `${run.label} (${run.framework})`),
        graphs.length ? h("div", { class: "graphs" }, graphs) : null, stories.map(history));
    });
  document.getElementById("prompt").replaceChildren(...[
    h("nav", {}, h("a", { href: "#" }, "← all prompts"), " ", link(pos > 0 ? state.order[pos - 1] : null, "‹ previous"), " ",
      link(pos >= 0 && pos < state.order.length - 1 ? state.order[pos + 1] : null, "next ›")),
    h("h2", {}, `${prompt.id} · ${prompt.aspect}`), h("blockquote", { class: "prompt" }, prompt.text),
    h("h3", {}, "Final stories"), h("div", { class: "finals" }, finals),
    histories.length ? [h("h3", {}, "Drafts and feedback"), h("p", { class: "note" }, "Each version is shown against the one before it: ",
      h("ins", {}, "added"), " and ", h("del", {}, "removed"), " words."), histories] : null].flat(Infinity).filter(Boolean));
}

function route() {
  const m = /^#prompt\/(\d+)$/.exec(location.hash);
  const p = m ? Number(m[1]) : null;
  const show = p != null && p < DATA.prompts.length;
  if (show) renderPrompt(p);
  document.getElementById("overview").hidden = show;
  document.getElementById("prompt").hidden = !show;
  window.scrollTo(0, 0);
}

renderOverview();
window.addEventListener("hashchange", route);
route();
document.documentElement.dataset.renderMs = performance.now().toFixed(0);
