/* Compactor dashboard: forms with data-api-url call the REST API (the same endpoints agents
 * use) with the session cookie + CSRF token, then hand over to htmx fragments.
 *
 *   data-api-url   endpoint to POST JSON to
 *   data-target    selector of the element showing the outcome
 *   data-then      dashboard fragment to load after a job was accepted; the zero UUID in it
 *                  is replaced by the job id from the answer
 *   button data-mode="preview"  render the dry-run answer instead of loading a job fragment
 *   button data-extra='{"dry_run": true}'  merged into the JSON body
 *
 * Every value from the server is written with textContent: nothing is parsed as HTML.
 */
(function () {
  "use strict";
  var ZERO = "00000000-0000-0000-0000-000000000000";

  function csrfToken() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRFToken"] || "";
    } catch (e) {
      return "";
    }
  }

  function formJson(form, submitter) {
    var data = {};
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!el.name || el.disabled || el.type === "submit" || el.type === "button") return;
      if (el.type === "checkbox") { data[el.name] = el.checked; return; }
      var value = (el.value || "").trim();
      if (value === "") return;
      data[el.name] = el.type === "number" ? Number(value) : value;
    });
    if (submitter && submitter.dataset.extra) {
      var extra = JSON.parse(submitter.dataset.extra);
      Object.keys(extra).forEach(function (k) { data[k] = extra[k]; });
    }
    return data;
  }

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function fmt(n) {
    return typeof n === "number" ? n.toLocaleString("en-US") : String(n);
  }

  // {"error": "...", "detail": {"field": ["problem"]}} (sessions/api/errors.py) → one line.
  function errorText(body, status) {
    if (!body) return "Request failed (HTTP " + status + ").";
    var parts = [];
    var seen = {};
    function add(text) {
      // The API may repeat the error line as detail.detail: say it once.
      text = String(text).trim();
      if (text && !seen[text.toLowerCase()]) { seen[text.toLowerCase()] = true; parts.push(text); }
    }
    if (body.error) add(body.error);
    var detail = body.detail;
    if (detail && typeof detail === "object") {
      Object.keys(detail).forEach(function (key) {
        var value = detail[key];
        value = Array.isArray(value) ? value.join(" ") : (typeof value === "object" ? JSON.stringify(value) : value);
        add(key === "detail" || key === "non_field_errors" ? value : key + ": " + value);
      });
    } else if (detail) {
      add(detail);
    }
    return parts.join(" — ") || "Request failed (HTTP " + status + ").";
  }

  // Same as sessions.dashboard.present.skip_reason: the engine's text may carry the prefix already.
  function skipReason(text) {
    text = String(text || "").replace(/^\s*nothing to compact\s*[:\-\u2014]\s*/i, "").trim();
    return text ? text.charAt(0).toUpperCase() + text.slice(1) : "the conversation is already short enough.";
  }

  function show(target, node) {
    target.replaceChildren(node);
  }

  function showError(target, text) {
    var box = el("div", "progress progress-failed");
    box.setAttribute("role", "alert");
    box.appendChild(el("p", "error", text));
    show(target, box);
  }

  function renderPreview(target, body) {
    var box = el("div", "preview");
    if (!body.would_compact) {
      box.appendChild(el("p", "warn", "Nothing to compact: " + skipReason(body.reason)));
      box.appendChild(el("p", "small muted", "Context now: " + fmt(body.tokens_before) + " tokens (auto-compact at " + fmt(body.trigger_tokens) + ")."));
      show(target, box);
      return;
    }
    var head = el("p");
    head.appendChild(el("strong", null, "Preview: "));
    var summary = body.strategy === "prune"
      ? "prune " + fmt(body.tool_results_pruned) + " tool outputs before #" + body.prune_before_seq
      : fmt(body.messages_summarized) + " messages (#" + body.first_summarized_seq + "–#" + body.last_summarized_seq + ") → summary";
    head.appendChild(el("span", "preview-figures", summary + ", " + fmt(body.tokens_before) + " → ~" + fmt(body.estimated_tokens_after) + " tokens"));
    box.appendChild(head);
    var dl = el("dl");
    [
      ["Summarized tokens", body.tokens_summarized],
      ["Kept verbatim", body.messages_kept !== undefined ? fmt(body.messages_kept) + " messages from #" + body.first_kept_seq + " (" + fmt(body.tokens_kept) + " tokens)" : null],
      ["Split turn", body.split_turn === undefined ? null : (body.split_turn ? "yes" : "no")],
      ["Estimated summary", body.estimated_summary_tokens !== undefined ? fmt(body.estimated_summary_tokens) + " tokens" : null],
      ["Why here", body.reason],
    ].forEach(function (row) {
      if (row[1] === null || row[1] === undefined) return;
      dl.appendChild(el("dt", null, row[0]));
      dl.appendChild(el("dd", null, typeof row[1] === "number" ? fmt(row[1]) : row[1]));
    });
    box.appendChild(dl);
    box.appendChild(el("p", "small muted", "Nothing has changed yet: press “Compact now” to run it."));
    show(target, box);
  }

  function jobId(body) {
    if (!body) return null;
    if (body.id) return body.id;
    if (body.job && body.job.id) return body.job.id;
    if (body.reverted && body.reverted.id) return body.reverted.id;
    return null;
  }

  function submit(form, submitter) {
    var mode = (submitter && submitter.dataset.mode) || form.dataset.mode || "job";
    var targetSel = mode === "preview" ? (form.dataset.previewTarget || form.dataset.target) : form.dataset.target;
    var target = document.querySelector(targetSel);
    var buttons = form.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    var pending = el("p", "small muted", mode === "preview" ? "Working out what would be summarized…" : "Sending…");
    show(target, pending);
    if (mode !== "preview" && form.dataset.previewTarget) {
      var preview = document.querySelector(form.dataset.previewTarget);
      if (preview) preview.replaceChildren();
    }
    fetch(form.dataset.apiUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify(formJson(form, submitter)),
    })
      .then(function (resp) {
        return resp.json().catch(function () { return null; }).then(function (body) { return { resp: resp, body: body }; });
      })
      .then(function (r) {
        if (!r.resp.ok) {
          showError(target, errorText(r.body, r.resp.status));
          // 409: the page is stale (e.g. the compaction was already undone elsewhere): refresh
          // gauge, chart, history and timeline in place; the error stays visible.
          if (r.resp.status === 409 && window.htmx) htmx.trigger(document.body, "compactor:changed");
          return;
        }
        if (mode === "preview") { renderPreview(target, r.body); return; }
        var id = jobId(r.body);
        if (!id || !form.dataset.then) { show(target, el("p", "ok", (r.body && r.body.message) || "Done.")); return; }
        // The fragment polls itself while the job is queued/running and, once finished,
        // fires "compactor:changed" so the gauge, chart and history refresh in place.
        htmx.ajax("GET", form.dataset.then.replace(ZERO, id), { target: target, swap: "innerHTML" });
      })
      .catch(function (err) { showError(target, "Network error: " + err.message); })
      .finally(function () { buttons.forEach(function (b) { b.disabled = false; }); });
  }

  // Copy buttons: <button data-copy="#input-id">. Clipboard API where allowed, else select + execCommand.
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button[data-copy]");
    if (!button) return;
    var input = document.querySelector(button.dataset.copy);
    if (!input) return;
    var status = document.getElementById(button.getAttribute("aria-describedby") || "");
    var done = function (text) { if (status) status.textContent = text; };
    input.focus();
    input.select();
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(input.value).then(
        function () { done("Copied to the clipboard."); },
        function () { done(document.execCommand("copy") ? "Copied to the clipboard." : "Selected: press Ctrl+C to copy."); }
      );
    } else {
      done(document.execCommand("copy") ? "Copied to the clipboard." : "Selected: press Ctrl+C to copy.");
    }
  });

  // Destructive forms ask first: <form data-confirm="question">.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.apiUrl) return;
    event.preventDefault();
    submit(form, event.submitter);
  });

  // Live pages (data-live: the session overview, the session list) poll only while the tab is
  // visible: a hidden tab's polls are dropped here, and its visibilitychange trigger asks once
  // when the tab shows again.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (document.hidden && elt && elt.hasAttribute && elt.hasAttribute("data-live")) event.preventDefault();
  });

  // Import page: the upload's progress (htmx reports the XHR's upload events), then a note
  // that the server is importing; a 400 (not a transcript) is swapped in like a success.
  document.addEventListener("htmx:xhr:progress", function (event) {
    if (!event.target || event.target.id !== "import-form") return;
    var bar = document.getElementById("import-progress");
    var text = document.getElementById("import-progress-text");
    var detail = event.detail || {};
    if (!bar || !detail.lengthComputable || !detail.total) return;
    var percent = Math.round((100 * detail.loaded) / detail.total);
    bar.value = percent;
    if (text) {
      text.textContent = percent < 100
        ? "Uploading… " + percent + " % of " + Math.round(detail.total / 1024) + " KB"
        : "Uploaded; importing the messages…";
    }
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (target && target.id === "import-result" && event.detail.xhr.status === 400) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
})();
