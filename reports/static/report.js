// Text filter over the example rows: a row stays when every word of the query occurs in it.
(function () {
  var input = document.getElementById("filter");
  if (!input) return;
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.example"));
  var counter = document.getElementById("filter-count");
  var texts = rows.map(function (r) { return r.textContent.toLowerCase(); });
  input.addEventListener("input", function () {
    var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    rows.forEach(function (r, i) {
      var keep = words.every(function (w) { return texts[i].indexOf(w) >= 0; });
      r.hidden = !keep;
      if (keep) shown += 1;
    });
    counter.textContent = words.length ? shown + " of " + rows.length + " examples match" : "";
  });
})();
