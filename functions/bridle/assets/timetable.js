// The web chat's "Timetable" panel: the person's events' timetables from GET /api/timetable,
// a grid per day (time rows x room columns, a CSS grid; breaks across every room), re-read when
// a turn's `effects` say the planner changed (app.js calls loadTimetable). Uses app.js's `api`
// and `el`; every text is set with textContent (titles come from people and the model).
"use strict";

const timetable = { chosen: null };
const TT_STEP = 5; // minutes per grid row

// Re-read the timetables; `eventId` (the event a tool just changed) becomes the one shown.
async function loadTimetable(eventId) {
  const box = document.querySelector("#timetable");
  let events;
  try {
    events = (await (await api("/api/timetable")).json()).events;
  } catch (err) {
    box.replaceChildren(el("p", "error", err.message));
    return;
  }
  if (eventId && events.some((e) => e.event_id === eventId)) timetable.chosen = eventId;
  if (!events.some((e) => e.event_id === timetable.chosen)) {
    const first = events.find((e) => e.built) || events.find((e) => e.days.length) || events[0];
    timetable.chosen = first ? first.event_id : null;
  }
  renderPicker(events);
  const event = events.find((e) => e.event_id === timetable.chosen);
  box.replaceChildren(...(event ? eventGrids(event) : [el("p", "empty", "No events yet.")]));
}

function renderPicker(events) {
  const pick = document.querySelector("#timetable-event");
  pick.hidden = events.length < 2;
  pick.replaceChildren(...events.map((e) => {
    const option = el("option", "", `${e.title} · ${e.starts_at.slice(0, 10)}`);
    option.value = e.event_id;
    return option;
  }));
  if (timetable.chosen) pick.value = timetable.chosen;
}

function eventGrids(event) {
  const out = [el("h3", "tt-event", event.title)];
  out[0].dataset.eventId = event.event_id;
  if (!event.built) {
    out.push(el("p", "empty", event.days.length
      ? "No timetable yet: ask the assistant to build it."
      : "No program yet: ask the assistant to set its rooms and sessions."));
    return out;
  }
  if (event.unplaced) {
    out.push(el("p", "hint", `${event.unplaced} session(s) not placed yet: build the timetable again.`));
  }
  for (const day of event.days) out.push(dayGrid(day));
  return out;
}

// One day: row 1 holds the room names; below it one row per TT_STEP minutes from day.start_minute.
function dayGrid(day) {
  const section = el("section", "tt-day");
  section.dataset.day = String(day.day);
  section.append(el("h4", "tt-day-title", `Day ${day.day} · ${day.start}–${day.end}`));
  const from = day.start_minute;
  const line = (minute) => 2 + Math.round((minute - from) / TT_STEP);
  const grid = el("div", "tt-grid");
  const rows = Math.max(1, Math.ceil((day.end_minute - from) / TT_STEP));
  grid.style.gridTemplateColumns = `3.2em repeat(${Math.max(1, day.rooms.length)}, minmax(7.5em, 1fr))`;
  grid.style.gridTemplateRows = `auto repeat(${rows}, var(--tt-row))`;
  grid.append(place(el("div", "tt-corner"), "1", "1"));
  day.rooms.forEach((room, i) => {
    const head = place(el("div", "tt-room", room), String(i + 2), "1");
    head.dataset.room = room;
    grid.append(head);
  });
  // A label and a rule at the start and at every full hour.
  for (let m = from; m < day.end_minute; m = (Math.floor(m / 60) + 1) * 60) {
    grid.append(place(el("div", "tt-rule"), "1 / -1", `${line(m)} / span 1`));
    const label = place(el("div", "tt-time", clockOf(m)), "1", `${line(m)} / span ${Math.min(60 / TT_STEP, rows)}`);
    grid.append(label);
  }
  for (const b of day.breaks) {
    const cell = place(el("div", "tt-break"), "2 / -1", span(line, b.start_minute, b.end_minute));
    cell.append(el("span", "tt-title", b.name), el("span", "tt-when", ` ${b.start}–${b.end}`));
    cell.dataset.start = b.start;
    grid.append(cell);
  }
  for (const s of day.sessions) {
    const column = day.rooms.indexOf(s.room);
    if (column < 0) continue;
    const cell = place(el("div", "tt-session"), String(column + 2), span(line, s.start_minute, s.end_minute));
    cell.dataset.sessionId = s.session_id;
    cell.dataset.room = s.room;
    cell.dataset.start = s.start;
    cell.title = `${s.title} (${s.start}–${s.end}, ${s.room})`;
    cell.append(el("span", "tt-title", s.title), el("span", "tt-when", `${s.start}–${s.end}`));
    if (s.track) cell.append(el("span", "tt-track", s.track));
    if (s.speakers.length) cell.append(el("span", "tt-speakers", s.speakers.join(", ")));
    grid.append(cell);
  }
  const scroll = el("div", "tt-scroll");
  scroll.append(grid);
  section.append(scroll);
  return section;
}

function place(node, column, row) {
  node.style.gridColumn = column;
  node.style.gridRow = row;
  return node;
}

function span(line, start, end) {
  return `${line(start)} / ${Math.max(line(start) + 1, line(end))}`;
}

function clockOf(minute) {
  return `${String(Math.floor(minute / 60)).padStart(2, "0")}:${String(minute % 60).padStart(2, "0")}`;
}

document.querySelector("#timetable-event").addEventListener("change", (e) => {
  timetable.chosen = e.target.value;
  loadTimetable();
});
document.querySelector("#timetable-wide").addEventListener("click", (e) => {
  const wide = document.body.classList.toggle("wide-panel");
  e.target.setAttribute("aria-pressed", String(wide));
  e.target.textContent = wide ? "Narrower" : "Wider";
});
loadTimetable();
