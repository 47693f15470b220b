// Live fragments of the groups, messages and charts pages: no framework, no build step.
// <div data-refresh="/url" data-every="2000">: the server renders the fragment at /url with
// the same template as the page; it is fetched again every `data-every` ms and swapped in.
"use strict";

const ApogeeLive = (() => {
  function refreshFragments() {
    document.querySelectorAll("[data-refresh]").forEach((box) => {
      const every = Number(box.dataset.every || 5000);
      let reported = false;
      const step = async () => {
        try {
          const resp = await fetch(box.dataset.refresh, { credentials: "same-origin", headers: { Accept: "text/html" } });
          if (!resp.ok) throw { title: "HTTP " + resp.status, detail: "refreshing " + box.dataset.refresh };
          box.innerHTML = await resp.text();
          box.dataset.refreshed = String(Number(box.dataset.refreshed || 0) + 1);
          // a filter box over the swapped rows applies to the new ones too
          document.querySelectorAll("input[data-filter]").forEach((input) => input.dispatchEvent(new Event("input")));
          reported = false;
        } catch (problem) {
          if (!reported && window.Apogee) Apogee.showProblem(problem);
          reported = true;
        }
        setTimeout(step, every);
      };
      setTimeout(step, every);
    });
  }

  // <input type="checkbox" data-check-all="name-prefix">: (un)check every checkbox whose name starts so.
  function wireCheckAll() {
    document.querySelectorAll("input[data-check-all]").forEach((all) => {
      all.addEventListener("change", () => {
        document.querySelectorAll('input[type=checkbox][name^="' + all.dataset.checkAll + '"]').forEach((box) => {
          box.checked = all.checked;
        });
      });
    });
  }

  document.addEventListener("DOMContentLoaded", () => { refreshFragments(); wireCheckAll(); });
  return { refreshFragments };
})();
