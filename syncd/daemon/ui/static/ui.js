// syncd's page: the only script. It refreshes the parts of a page marked data-live (an HTML
// fragment of the same server, escaped there) and submits the plan filter when a choice changes.
// Everything else works without it.
(function () {
  "use strict";
  var PERIOD = 1000;
  // Where the page's URLs start as the browser sees them (a TLS proxy's prefix included).
  var ROOT = document.documentElement.getAttribute("data-ui") || "/ui/";

  function later(element, wait) {
    window.setTimeout(function () { refresh(element); }, wait || PERIOD);
  }

  function refresh(element) {
    var url = element.getAttribute("data-live");
    if (!url) { return; }
    if (document.hidden) { later(element, 2 * PERIOD); return; }
    fetch(url, { credentials: "same-origin", cache: "no-store" }).then(function (response) {
      if (response.status === 401) { window.location.assign(ROOT + "login"); return null; }
      return response.ok ? response.text() : null;
    }).then(function (text) {
      if (text === null) { later(element, 5 * PERIOD); return; }
      element.innerHTML = text;
      if (element.querySelector("[data-done]")) {
        element.removeAttribute("data-live");  // the run ended: nothing will change any more
        return;
      }
      later(element);
    }).catch(function () { later(element, 5 * PERIOD); });
  }

  function start() {
    var live = document.querySelectorAll("[data-live]");
    for (var i = 0; i < live.length; i++) { later(live[i]); }
    var filter = document.getElementById("plan-filter");
    if (filter) {
      var selects = filter.querySelectorAll("select");
      for (var j = 0; j < selects.length; j++) {
        selects[j].addEventListener("change", function () { filter.submit(); });
      }
    }
  }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
