// The try-it page's script (index.html): a file of its own, as the page's Content-Security-Policy
// allows no inline script.
"use strict";
const $ = (id) => document.getElementById(id);
let models = {};

function el(tag, attrs, ...children) {
  // style is an object of properties set through the CSSOM: the page's Content-Security-Policy refuses
  // style attributes, and the properties are not markup
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "style") for (const [p, value] of Object.entries(v)) node.style.setProperty(p, value);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

function chosen() { return models[$("model").value]; }

// The API key, when the server needs one (docs/serving.md#api-keys): typed into the page, kept in this tab's
// sessionStorage (gone when the tab closes; never in a cookie, the URL or localStorage) and sent as a Bearer header.
const KEY = "appzoo_api_key";
function authorized(headers) {
  const key = sessionStorage.getItem(KEY);
  return key ? {...headers, Authorization: `Bearer ${key}`} : headers;
}

function refused(response, answer) {
  // a 401: say what to do, with the server's own line
  if (response.status !== 401) return false;
  $("key_box").open = true;
  $("error").textContent = `${answer.error}. Enter the server's API key above and press "Use this key".`;
  $("meta").textContent = "";
  return true;
}

function useKey() {
  const key = $("api_key").value.trim();
  if (key) sessionStorage.setItem(KEY, key); else sessionStorage.removeItem(KEY);
  $("api_key").value = "";
  $("error").textContent = "";
  $("model").replaceChildren();
  models = {};
  loadModels();
}

function showModel() {
  const m = chosen();
  if (!m) return;
  const pair = m.input === "pair";
  $("second").hidden = !pair;
  $("text_b").required = pair;
  $("label_a").textContent = pair ? "First text" : "Text";
  $("meta").textContent = `${m.description} · ${m.labels.length} labels · engine ${m.engine}` +
    (m.threshold !== undefined ? ` · threshold ${m.threshold.toFixed(3)}` : "");
  $("result").replaceChildren();
}

async function loadModels() {
  const response = await fetch("/models", {headers: authorized({})});
  const answer = await response.json();
  if (refused(response, answer)) return;
  for (const m of answer.models) {
    models[m.name] = m;
    $("model").append(el("option", {value: m.name}, m.name));
  }
  if (!answer.ready) {
    $("meta").textContent = "loading the models…";
    setTimeout(() => { $("model").replaceChildren(); models = {}; loadModels(); }, 1000);
    return;
  }
  showModel();
}

function probabilityBars(probs, picked, thresholds) {
  // multi-label: each label's own threshold marked on its bar (a label is given at or above it)
  const box = el("div", {id: "bars"});
  const sorted = Object.entries(probs).sort((a, b) => b[1] - a[1]);
  for (const [name, p] of sorted) {
    const track = el("div", {class: "track"}, el("div", {class: "fill", style: {width: `${(100 * p).toFixed(1)}%`}}));
    if (thresholds) {
      const t = thresholds[name];
      track.append(el("div", {class: "thr", style: {left: `${(100 * t).toFixed(1)}%`}, title: `threshold ${t.toFixed(3)}`}));
    }
    box.append(el("div", {class: "bar" + (picked.includes(name) ? " top" : ""), "data-label": name},
                  el("span", {class: "name"}, name), track, el("span", {class: "p"}, p.toFixed(3))));
  }
  if (thresholds) box.append(el("p", {class: "legend"}, "▏ each label's threshold, tuned on dev"));
  return box;
}

// characters the server joins an entity's tokens around without a space (join_tokens, in the tagging task)
const CJK = /[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]/;
const HUES = [215, 30, 130, 330, 270, 55, 180, 0];  // one per entity type, in the order of the model's labels

function entitySentence(m, row, entities, typed) {
  // The tokens laid back into the text as it was typed, with its own spaces between them (none between the
  // characters of a Chinese text); a token not found there, as when a reader changed it, is joined to the
  // one before as the server joins an entity's text (join_tokens).
  const source = "text" in row ? row.text : typed;
  const tokens = row.tokens;
  let cursor = 0;
  const gaps = tokens.map((token, i) => {
    const found = source.indexOf(token, cursor);
    if (found >= 0 && !source.slice(cursor, found).trim()) {  // next in the text, after nothing but spaces
      const between = source.slice(cursor, found);
      cursor = found + token.length;
      return i ? between : "";
    }
    return i && !CJK.test(tokens[i - 1].slice(-1)) && !CJK.test(token.charAt(0)) ? " " : "";
  });
  const words = (start, end) => tokens.slice(start, end).map((t, k) => (k ? gaps[start + k] : "") + t).join("");
  const types = [...new Set(m.labels.filter((l) => l !== "O").map((l) => l.replace(/^[BIESLMU]-/, "")))];
  const box = el("div", {class: "sentence", id: "sentence"});
  let at = 0;
  for (const e of entities) {
    if (e.start > at) box.append(gaps[at], words(at, e.start));
    const hue = HUES[types.indexOf(e.type) % HUES.length] ?? HUES[0];
    // the type is drawn by CSS (::after), so the sentence's text, and a copy of it, stays the sentence
    box.append(gaps[e.start], el("mark", {class: "ent", "data-type": e.type, style: {"--hue": String(hue)}},
                                words(e.start, e.end)));
    at = e.end;
  }
  if (at < tokens.length) box.append(gaps[at], words(at, tokens.length));
  const list = el("p", {id: "entity-count"}, `${entities.length} entit${entities.length === 1 ? "y" : "ies"}`);
  return [box, list];
}

function scoreLine(name, score, label, threshold) {
  // the score (by its field's name), against the decision threshold where the model has one, and the label
  const parts = [`${name} `, el("span", {id: "score"}, score.toFixed(4))];
  if (threshold !== undefined) {
    const match = score >= threshold;
    parts.push(" ", el("span", {class: match ? "match" : "nomatch"}, match ? "≥" : "<"),
               ` threshold ${threshold.toFixed(4)}`);
  }
  if (label !== undefined) parts.push(": ", el("b", {id: "label"}, label));
  return el("p", {class: "score", id: "answer"}, ...parts);
}

function labelsLine(field, m) {
  // one label or a set of them, and every label's probability as bars (a set: each label's threshold on its bar)
  const multi = "labels" in field;
  const picked = multi ? field.labels : [field.label];
  const out = [el("p", {id: "answer"}, multi ? "Labels: " : "Label: ", el("b", {}, picked.join(", ") || "(none)"))];
  if ("probs" in field) out.push(probabilityBars(field.probs, picked, multi ? m.thresholds : null));
  return out;
}

function render(m, answer, input) {
  // by the kinds of the fields the model declares (GET /models: outputs), never by its task's name
  const row = answer.predictions[0];
  const field = {}, named = {};  // kind -> the row's value of the first field of that kind, and its name
  for (const f of m.outputs) if (!(f.kind in field)) [field[f.kind], named[f.kind]] = [row[f.name], f.name];
  const out = [];
  if ("score" in field) out.push(scoreLine(named.score, field.score, field.label, m.threshold));
  else if ("label" in field || "labels" in field) out.push(...labelsLine(field, m));
  if ("entities" in field) out.push(...entitySentence(m, row, field.entities, input));
  else if ("tags" in field) out.push(el("p", {id: "tags"}, "Tags: ", el("b", {}, field.tags.join(" "))));
  for (const note of answer.notes || []) out.push(el("p", {class: "note"}, note));
  $("result").replaceChildren(...out);
}

async function submit(event) {
  event.preventDefault();
  const m = chosen();
  const input = m.input === "pair" ? [$("text_a").value, $("text_b").value] : $("text_a").value;
  $("error").textContent = "";
  const response = await fetch(`/models/${encodeURIComponent(m.name)}/predict`, {
    method: "POST", headers: authorized({"Content-Type": "application/json"}), body: JSON.stringify({inputs: [input]})});
  const answer = await response.json();
  if (refused(response, answer)) { $("result").replaceChildren(); return; }
  if (!response.ok) { $("error").textContent = answer.error; $("result").replaceChildren(); return; }
  render(m, answer, input);
  document.body.dataset.answered = String(Number(document.body.dataset.answered || 0) + 1);
}

$("model").addEventListener("change", showModel);
$("form").addEventListener("submit", submit);
$("use_key").addEventListener("click", useKey);
loadModels();
