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

// The Review page's keys (pipeline/console/review_pages.py): j / ArrowRight next, k / ArrowLeft
// previous, a verdict key (each verdict button's data-key) submits the form with that verdict,
// c / l / x focus the comment, labels and expected fields, Escape leaves a field. Keys typed in
// a field stay in the field; every action is also a plain link or button.
(function () {
  "use strict";
  var form = document.getElementById("verdict-form");
  if (!form) {
    return;
  }
  var fields = {c: "comment", l: "labels", x: "expected"};
  function follow(id) {
    var link = document.getElementById(id);
    if (link) {
      window.location.assign(link.getAttribute("href"));
    }
  }
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    var typing = target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA");
    if (typing) {
      if (event.key === "Escape") {
        target.blur();
      }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) {
      return;
    }
    if (event.key === "j" || event.key === "ArrowRight") {
      follow("next");
    } else if (event.key === "k" || event.key === "ArrowLeft") {
      follow("prev");
    } else if (fields[event.key]) {
      document.getElementById(fields[event.key]).focus();
    } else {
      var button = form.querySelector('button[data-key="' + CSS.escape(event.key) + '"]');
      if (!button || button.disabled) {
        return;
      }
      form.requestSubmit(button);
    }
    event.preventDefault();
  });
  document.body.setAttribute("data-keys", "ready");
})();
