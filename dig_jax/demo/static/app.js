// dig_jax demo page: draw on a photo with a radius-5 brush (mouse, pen, touch); every released
// stroke is sent with the current mask to /api/predict and the answer is overlaid.
// Per-user state (photo, mask, undo stack) lives here; the server keeps only the photos.
"use strict";

const $ = (id) => document.getElementById(id);
const canvas = $("canvas");
const ctx = canvas.getContext("2d");

// Exposed as window.digDemo for the browser tests.
const S = {
  info: null,
  photo: null, // {id, name, width, height}
  image: null, // HTMLImageElement of the photo (served by the server, after any downscaling)
  mask: null, // PNG data URL of the current mask (0 / 255) or null
  overlay: null, // canvas: the mask coloured for display
  undo: [], // previous masks (data URLs or null)
  drawing: null, // {pointerId, points} while the pointer is down
  shown: null, // points of the last answered stroke, drawn faintly over the mask
  queue: [], // released strokes waiting for their mask: {points, t0, generation}
  busy: false,
  generation: 0, // bumped when the photo changes or on undo/reset: stale answers are dropped
  predictions: 0,
  lastLatencyMs: null, // pointer release -> mask drawn
  lastPoints: null,
  lastResponse: null,
  ready: false,
};
window.digDemo = S;

function showMessage(text, isError = false) {
  const el = $("message");
  el.textContent = text;
  el.classList.toggle("error", isError);
  el.classList.remove("busy");
}

function brushRadius() {
  return S.info ? S.info.brush_radius : 5;
}

function toPhoto(event) {
  // Pointer position -> photo pixel coordinates (x = column, y = row; pixel centres at integers).
  const r = canvas.getBoundingClientRect();
  const x = ((event.clientX - r.left) * canvas.width) / r.width - 0.5;
  const y = ((event.clientY - r.top) * canvas.height) / r.height - 0.5;
  return [Math.round(x * 10) / 10, Math.round(y * 10) / 10];
}

function paintStroke(points, alpha = 0.9) {
  // The radius-5 disc brush in photo pixels: what the server rasterises.
  const radius = brushRadius();
  ctx.fillStyle = ctx.strokeStyle = `rgba(255, 214, 10, ${alpha})`;
  if (points.length === 1) {
    ctx.beginPath();
    ctx.arc(points[0][0] + 0.5, points[0][1] + 0.5, radius, 0, 2 * Math.PI);
    ctx.fill();
    return;
  }
  ctx.lineWidth = 2 * radius;
  ctx.lineCap = ctx.lineJoin = "round";
  ctx.beginPath();
  ctx.moveTo(points[0][0] + 0.5, points[0][1] + 0.5);
  for (const [x, y] of points.slice(1)) ctx.lineTo(x + 0.5, y + 0.5);
  ctx.stroke();
}

let frameRequested = false;
function redraw() {
  frameRequested = false;
  if (!S.image) return;
  ctx.globalAlpha = 1;
  ctx.drawImage(S.image, 0, 0);
  if (S.overlay) {
    ctx.globalAlpha = Number($("opacity").value) / 100;
    ctx.drawImage(S.overlay, 0, 0);
    ctx.globalAlpha = 1;
  }
  if (S.shown) paintStroke(S.shown, 0.45);
  for (const stroke of S.queue) paintStroke(stroke.points);
  if (S.drawing) paintStroke(S.drawing.points);
}
function scheduleRedraw() {
  if (!frameRequested) {
    frameRequested = true;
    requestAnimationFrame(redraw);
  }
}

async function makeOverlay(dataUrl) {
  // Grey PNG mask -> a canvas painted blue where the mask is set, transparent elsewhere.
  if (!dataUrl) return null;
  const img = new Image();
  img.src = dataUrl;
  await img.decode();
  const off = document.createElement("canvas");
  off.width = img.width;
  off.height = img.height;
  const octx = off.getContext("2d");
  octx.drawImage(img, 0, 0);
  const data = octx.getImageData(0, 0, off.width, off.height);
  const px = data.data;
  for (let i = 0; i < px.length; i += 4) {
    const on = px[i] > 127;
    px[i] = 30;
    px[i + 1] = 144;
    px[i + 2] = 255;
    px[i + 3] = on ? 255 : 0;
  }
  octx.putImageData(data, 0, 0);
  return off;
}

async function setMask(dataUrl) {
  S.overlay = await makeOverlay(dataUrl);
  S.mask = dataUrl;
  updateButtons();
  redraw();
}

function updateButtons() {
  $("undo").disabled = S.undo.length === 0;
  $("reset").disabled = S.mask === null && S.undo.length === 0;
  const link = $("download");
  link.classList.toggle("disabled", S.mask === null);
  if (S.mask) {
    link.href = S.mask;
    link.download = (S.photo ? S.photo.name.replace(/[^\w.-]+/g, "_") : "photo") + "_mask.png";
  } else {
    link.removeAttribute("href");
  }
}

function showHeads(heads) {
  const el = $("heads");
  if (!heads) {
    el.textContent = S.info && S.info.multihead ? "" : "This checkpoint has no gesture heads.";
    return;
  }
  const pct = (p) => `${Math.round(100 * p)} %`;
  const context = heads.add_prob >= 0.5 ? "adds" : "removes";
  el.textContent =
    `The model read the stroke as a ${heads.kind} (${pct(heads.kind_probs[heads.kind])}) ` +
    `that ${context} (p(add) = ${heads.add_prob.toFixed(2)}).`;
}

async function pump() {
  // Strokes are answered in order: each one refines the mask the previous one produced.
  if (S.busy) return;
  S.busy = true;
  while (S.queue.length) {
    const stroke = S.queue[0];
    $("message").classList.add("busy");
    try {
      const response = await fetch("/api/predict", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ photo: S.photo.id, points: stroke.points, prev_mask: S.mask }),
      });
      const body = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
      if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
      if (stroke.generation !== S.generation) continue; // photo changed, undo or reset
      const previous = S.mask;
      await setMask(body.mask);
      S.undo.push(previous);
      S.predictions += 1;
      S.lastLatencyMs = performance.now() - stroke.t0;
      S.lastPoints = S.shown = stroke.points;
      S.lastResponse = body;
      updateButtons();
      showHeads(body.heads);
      showMessage(`Mask: ${body.area} px. Keep drawing to refine it.`);
      $("latency").textContent =
        `${Math.round(S.lastLatencyMs)} ms from release to mask ` +
        `(model ${Math.round(body.predict_ms)} ms, server ${Math.round(body.server_ms)} ms)`;
    } catch (err) {
      if (stroke.generation === S.generation) showMessage(err.message, true);
    } finally {
      S.queue.shift();
    }
  }
  S.busy = false;
  scheduleRedraw();
}

function clearStrokes() {
  S.generation += 1;
  S.queue.length = S.busy ? 1 : 0; // the stroke in flight stays until its answer is dropped
  S.drawing = S.shown = null;
}

// Pointer input: mouse, pen and touch alike (one pointer at a time).
canvas.addEventListener("pointerdown", (event) => {
  if (!S.ready || S.drawing || (event.pointerType === "mouse" && event.button !== 0)) return;
  event.preventDefault();
  canvas.setPointerCapture(event.pointerId);
  S.drawing = { pointerId: event.pointerId, points: [toPhoto(event)] };
  S.shown = null;
  scheduleRedraw();
});
canvas.addEventListener("pointermove", (event) => {
  if (!S.drawing || event.pointerId !== S.drawing.pointerId) return;
  const events = event.getCoalescedEvents ? event.getCoalescedEvents() : [event];
  for (const e of events.length ? events : [event]) S.drawing.points.push(toPhoto(e));
  scheduleRedraw();
});
canvas.addEventListener("pointerup", (event) => {
  if (!S.drawing || event.pointerId !== S.drawing.pointerId) return;
  const t0 = performance.now();
  const points = S.drawing.points;
  const last = toPhoto(event);
  const tail = points[points.length - 1];
  if (last[0] !== tail[0] || last[1] !== tail[1]) points.push(last);
  S.drawing = null;
  S.queue.push({ points, t0, generation: S.generation });
  scheduleRedraw();
  pump();
});
canvas.addEventListener("pointercancel", () => {
  S.drawing = null;
  scheduleRedraw();
});

function fitCanvas() {
  // Show the photo as large as the window allows (up to 2×); drawing maps back to photo pixels.
  const main = canvas.parentElement;
  const availW = main.clientWidth;
  const availH = window.innerHeight - main.getBoundingClientRect().top - 72;
  const scale = Math.max(0.1, Math.min(availW / canvas.width, availH / canvas.height, 2));
  canvas.style.width = `${Math.floor(canvas.width * scale)}px`;
  canvas.style.height = `${Math.floor(canvas.height * scale)}px`;
}
window.addEventListener("resize", fitCanvas);

async function loadPhoto(meta) {
  S.ready = false;
  clearStrokes();
  showMessage("Loading the photo…");
  const img = new Image();
  img.src = `/api/photo/${meta.id}`;
  try {
    await img.decode();
  } catch (err) {
    showMessage(`Could not load the photo ${meta.name}.`, true);
    return;
  }
  S.photo = meta;
  S.image = img;
  canvas.width = img.naturalWidth;
  canvas.height = img.naturalHeight;
  fitCanvas();
  S.undo = [];
  await setMask(null);
  showHeads(null);
  $("latency").textContent = "";
  S.ready = true;
  showMessage(
    `${meta.name} (${meta.width}×${meta.height}). Draw on it.` + (meta.note ? ` Note: ${meta.note}.` : ""),
  );
}

async function upload(file) {
  showMessage(`Uploading ${file.name}…`);
  try {
    const response = await fetch("/api/upload", {
      method: "POST",
      headers: { "X-Filename": file.name.slice(0, 200).replace(/[^\x20-\x7e]/g, "_") },
      body: file,
    });
    const body = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
    if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
    const option = new Option(`upload: ${body.name}`, JSON.stringify(body));
    $("examples").add(option);
    $("examples").value = option.value;
    await loadPhoto(body);
  } catch (err) {
    showMessage(`Upload refused: ${err.message}`, true);
  }
}

$("upload").addEventListener("change", (event) => {
  if (event.target.files.length) upload(event.target.files[0]);
  event.target.value = "";
});
canvas.addEventListener("dragover", (event) => event.preventDefault());
canvas.addEventListener("drop", (event) => {
  event.preventDefault();
  if (event.dataTransfer.files.length) upload(event.dataTransfer.files[0]);
});
$("examples").addEventListener("change", () => loadPhoto(JSON.parse($("examples").value)));
$("opacity").addEventListener("input", scheduleRedraw);
$("undo").addEventListener("click", async () => {
  if (!S.undo.length) return;
  clearStrokes();
  await setMask(S.undo.pop());
  showMessage("Undone.");
});
$("reset").addEventListener("click", async () => {
  clearStrokes();
  S.undo = [];
  await setMask(null);
  showHeads(null);
  showMessage("Reset: draw to start a new mask.");
});

async function start() {
  try {
    const response = await fetch("/api/info");
    S.info = await response.json();
  } catch (err) {
    showMessage("The demo server does not answer.", true);
    return;
  }
  const info = S.info;
  for (const ex of info.examples) $("examples").add(new Option(ex.name, JSON.stringify(ex)));
  $("about").textContent =
    `Checkpoint ${info.checkpoint} (${info.backbone}, working size ${info.working_size} px, ` +
    `${info.multihead ? "with" : "without"} gesture heads). Brush radius ${info.brush_radius} ` +
    `photo px. Uploads up to ${info.max_upload_mib} MiB; photos longer than ${info.max_side} px ` +
    `are downscaled to ${info.max_side} px.`;
  if (info.examples.length) await loadPhoto(info.examples[0]);
  else showMessage("Upload a photo to start.");
}
start();
