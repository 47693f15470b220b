// The message detail page: the body's Text / JSON / Hex tabs.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const box = document.getElementById("body");
  if (!box) return;
  box.querySelectorAll(".tabs button").forEach((button) => {
    button.addEventListener("click", () => {
      box.querySelectorAll(".tabs button").forEach((b) => b.classList.toggle("active", b === button));
      box.querySelectorAll("pre[data-view]").forEach((pre) => { pre.hidden = pre.dataset.view !== button.dataset.view; });
    });
  });
});
