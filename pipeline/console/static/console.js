// The console's only script: draws each chart (an element with a data-spec attribute holding a
// Vega-Lite spec with inline data, made safe by models/rendering.py) with the vendored
// vega-embed, as SVG. Sets data-status on <body>: "rendered" when every chart is drawn,
// "chart-error" when one failed. No text from the archive is ever put in as markup.
(function () {
  "use strict";
  var pending = [];
  document.querySelectorAll("[data-spec]").forEach(function (node) {
    var spec = JSON.parse(node.getAttribute("data-spec"));
    pending.push(window.vegaEmbed(node, spec, {renderer: "svg", actions: false}));
  });
  Promise.all(pending).then(function () {
    document.body.setAttribute("data-status", "rendered");
  }, function (error) {
    document.body.setAttribute("data-status", "chart-error");
    var note = document.createElement("pre");
    note.className = "chart-error";
    note.textContent = String(error);
    document.body.appendChild(note);
  });
})();
