// Rating page: one rater's queue, one story at a time. Story text and every other piece of data
// reach the DOM as text nodes or attribute values, never as markup. A rating is shown as saved
// only after the server has committed it.
"use strict";

const DATA = JSON.parse(document.getElementById("rate-data").textContent);
const ENDPOINT = location.pathname.replace(/\/+$/, "") + "/rate";
const ratings = DATA.ratings;  // story id -> {aspect: value}, the current ones
let current = 0;
let pending = null;  // {key, submission}: the id is reused when the same values are sent again

const isRated = (s) => DATA.aspects.every((a) => ratings[s.id] && ratings[s.id][a.key] != null);

function renderProgress() {
  const done = DATA.stories.filter(isRated).length;
  document.getElementById("progress").textContent = `${DATA.rater}: ${done} of ${DATA.stories.length} rated`;
  document.getElementById("queue").replaceChildren(...DATA.stories.map((s, i) => h("button", {
    type: "button", "data-index": i, class: isRated(s) ? "rated" : null, "aria-current": i === current ? "true" : "false",
    title: isRated(s) ? "rated" : "not rated yet", on: { click: () => show(i) } }, String(i + 1))));
}

function chosen() {
  const out = {};
  for (const a of DATA.aspects) {
    const input = document.querySelector(`input[name="${a.key}"]:checked`);
    if (input) out[a.key] = Number(input.value);
  }
  return out;
}

function setStatus(state, text) {
  const el = document.getElementById("status");
  el.dataset.state = state;
  el.textContent = text;
}

function aspectFields(story) {
  const mine = ratings[story.id] || {};
  return DATA.aspects.map((a) => h("fieldset", { "data-aspect": a.key }, h("legend", {}, a.name),
    a.description ? h("p", { class: "description" }, a.description) : null,
    DATA.aspect_note ? h("p", { class: "note" }, DATA.aspect_note) : null,
    a.anchors.map(([value, text]) => h("label", { class: "choice" },
      h("input", { type: "radio", name: a.key, value, checked: mine[a.key] === value,
        on: { change: () => { document.getElementById("save").disabled = Object.keys(chosen()).length < DATA.aspects.length; } } }),
      DATA.mode === "likert" ? [h("b", {}, String(value)), h("span", {}, text)] : h("span", {}, text)))));
}

function show(i) {
  current = i;
  const story = DATA.stories[i];
  const complete = isRated(story);
  document.getElementById("story").replaceChildren(
    h("h2", {}, `Story ${i + 1} of ${DATA.stories.length}`),
    story.task ? h("blockquote", { class: "task" }, h("b", {}, "Writing task: "), story.task) : null,
    h("div", { class: "story-text", "data-story": story.id }, story.text),
    h("form", { id: "rating", on: { submit: (e) => { e.preventDefault(); save(); } } }, aspectFields(story),
      h("div", { class: "actions" }, h("button", { id: "save", type: "submit", disabled: !complete }, complete ? "Save change" : "Save"),
        h("span", { id: "status", role: "status", "data-state": complete ? "saved" : "new" }, complete ? "Saved earlier" : ""))));
  renderProgress();
  window.scrollTo(0, 0);
}

// 128 random bits as 32 hex digits. Not crypto.randomUUID: browsers offer it only to secure contexts
// (https or localhost), and a study served on a lab network (--host 0.0.0.0) is plain http.
function submissionId() {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function save() {
  const story = DATA.stories[current], values = chosen();
  if (Object.keys(values).length < DATA.aspects.length) return setStatus("error", "Rate every aspect first.");
  const key = story.id + JSON.stringify(values);
  if (!pending || pending.key !== key) pending = { key, submission: submissionId() };
  document.getElementById("save").disabled = true;
  setStatus("saving", "Saving…");
  try {
    const reply = await fetch(ENDPOINT, { method: "POST", headers: { "Content-Type": "application/json" }, cache: "no-store",
      body: JSON.stringify({ story: story.id, submission: pending.submission, ratings: values }) });
    const body = await reply.json().catch(() => ({}));
    if (!reply.ok) throw new Error(body.error || `the server answered ${reply.status}`);
    ratings[story.id] = values;
    pending = null;
    const next = DATA.stories.findIndex((s, k) => k > current && !isRated(s));
    const later = next >= 0 ? next : DATA.stories.findIndex((s) => !isRated(s));
    if (later >= 0) show(later);
    else { renderProgress(); setStatus("saved", "Saved. Every story is rated: thank you."); document.getElementById("save").disabled = false; }
  } catch (err) {
    document.getElementById("save").disabled = false;
    setStatus("error", `Not saved: ${err.message}. Press Save to try again.`);
  }
}

document.title = DATA.title;
document.getElementById("title").textContent = DATA.title;
document.getElementById("intro-text").textContent = DATA.intro;
const first = DATA.stories.findIndex((s) => !isRated(s));
document.getElementById("intro").open = first === 0;
show(first >= 0 ? first : 0);
document.documentElement.dataset.ready = "1";
