// The dashboard's own script: small helpers, no framework, no build step.
// Pages work without it (forms post, links navigate); it adds confirmations, instant table
// filters, live refreshes and the progress of long jobs.
"use strict";

const Apogee = (() => {
  // A JSON endpoint's answer; an {"error": problem} answer throws the problem.
  async function getJSON(url, options) {
    const resp = await fetch(url, Object.assign({ credentials: "same-origin", headers: { Accept: "application/json" } }, options || {}));
    let body = null;
    try { body = await resp.json(); } catch (e) { body = null; }
    if (!resp.ok || (body && body.error)) {
      throw (body && body.error) || { title: "HTTP " + resp.status, detail: resp.statusText, status: resp.status };
    }
    return body;
  }

  // A problem ({title, detail, where}) in the layout's banner, as the server renders it
  // (once: a problem the banner already shows is not repeated).
  function showProblem(problem) {
    const banner = document.getElementById("banner");
    if (!banner) return;
    for (const shown of banner.querySelectorAll(".banner.error")) {
      const title = shown.querySelector("strong"), detail = shown.querySelector(".detail");
      if (title && detail && title.textContent === (problem.title || "Error") && detail.textContent === (problem.detail || "")) return;
    }
    const div = document.createElement("div");
    div.className = "banner error";
    div.setAttribute("role", "alert");
    const strong = document.createElement("strong");
    strong.textContent = problem.title || "Error";
    div.appendChild(strong);
    if (problem.where) {
      const where = document.createElement("span");
      where.className = "where";
      where.textContent = " (" + problem.where + ")";
      div.appendChild(where);
    }
    const detail = document.createElement("div");
    detail.className = "detail";
    detail.textContent = problem.detail || "";
    div.appendChild(detail);
    banner.appendChild(div);
  }

  // Poll /jobs/{id} until the job ends; draw its progress into `box` (a .progress bar and a
  // message), then call onDone(job).  A failed job's problem goes to the banner.
  function pollJob(id, box, onDone) {
    const bar = box.querySelector(".progress > div");
    const text = box.querySelector(".job-message");
    const step = async () => {
      let job;
      try {
        job = await getJSON("/jobs/" + encodeURIComponent(id));
      } catch (problem) {
        showProblem(problem);
        return;
      }
      if (bar) bar.style.width = (job.total ? Math.round(100 * job.done / job.total) : (job.state === "running" ? 5 : 100)) + "%";
      if (text) text.textContent = job.message || (job.total ? job.done + " / " + job.total : job.state);
      box.dataset.state = job.state;
      if (job.state === "running") {
        setTimeout(step, 250);
      } else if (job.state === "failed") {
        showProblem(job.error);
        if (onDone) onDone(job);
      } else if (onDone) {
        onDone(job);
      }
    };
    step();
  }

  // Call fn(data) with url's JSON now and every `ms` milliseconds while the page is open.
  function refreshEvery(url, ms, fn) {
    let reported = false;
    const step = async () => {
      try {
        fn(await getJSON(url));
        reported = false;
      } catch (problem) {
        if (!reported) showProblem(problem);
        reported = true;
      }
      setTimeout(step, ms);
    };
    step();
  }

  // A millisecond timestamp as local time, as the server's `ms` filter writes it.
  function fmtMs(ms) {
    if (!ms || ms <= 0) return "-";
    const d = new Date(ms), p = (n, w) => String(n).padStart(w || 2, "0");
    return d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + " " + p(d.getHours()) + ":" +
      p(d.getMinutes()) + ":" + p(d.getSeconds()) + "." + p(d.getMilliseconds(), 3);
  }

  function wire() {
    // <form data-confirm="Delete topic X?">: ask first.
    document.querySelectorAll("form[data-confirm]").forEach((form) => {
      form.addEventListener("submit", (ev) => {
        if (!window.confirm(form.dataset.confirm)) ev.preventDefault();
      });
    });
    // <input data-filter="#table-id, ...">: hide the rows whose text does not contain the input.
    document.querySelectorAll("input[data-filter]").forEach((input) => {
      const tables = document.querySelectorAll(input.dataset.filter);
      if (!tables.length) return;
      const apply = () => {
        const needle = input.value.trim().toLowerCase();
        let shown = 0;
        tables.forEach((table) => table.querySelectorAll("tbody tr").forEach((row) => {
          const hit = !needle || row.textContent.toLowerCase().includes(needle);
          row.hidden = !hit;
          if (hit) shown += 1;
        }));
        const count = document.querySelector(input.dataset.count || "#row-count");
        if (count) count.textContent = shown;
      };
      input.addEventListener("input", apply);
      apply();
    });
    // <div data-job="ID">: a job started by the server; reload (or go to data-done) when it ends.
    document.querySelectorAll("[data-job]").forEach((box) => {
      pollJob(box.dataset.job, box, (job) => {
        if (job.state === "done" && box.dataset.done) window.location.assign(box.dataset.done);
      });
    });
  }

  document.addEventListener("DOMContentLoaded", wire);
  return { getJSON, showProblem, pollJob, refreshEvery, fmtMs };
})();
