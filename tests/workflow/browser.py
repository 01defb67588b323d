"""A `snakemake --report` page opened in Debian's headless Chromium, as a reader opens it: its scripts run, each
result's view is rendered and read back as the browser shows it, and a screenshot is taken.

Chromium is driven through its command line only (``--dump-dom``, ``--screenshot``): a copy of the report carries a
probe, two small scripts, one at the head that records every script error and ``console.error`` before the report's
own scripts run, and one at the end that, once the page has loaded, opens each result's description (the
report's own ``app.showResultInfo``), shows each image, and writes what the browser rendered into the page as JSON,
which ``--dump-dom`` prints.  No DevTools client, nothing beyond the browser.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

# Debian's package (bookworm: chromium 156); .ci/chromium.sh installs it.
CHROMIUM = "chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--no-first-run",
    "--allow-file-access-from-files",
    # Timers run on virtual time: the probe's waits cost no wall-clock time, and the page is dumped once the budget
    # is spent or nothing is pending.
    "--virtual-time-budget=60000",
)
# A view is read after React has rendered it: one timer tick after setState is enough, 50 ms of virtual time is ample.
HEAD_PROBE = """<script>
window.ringErrors = [];
window.addEventListener("error", (e) => window.ringErrors.push(String(e.message || e)));
window.addEventListener("unhandledrejection", (e) => window.ringErrors.push(String(e.reason)));
(function () {
  const error = console.error.bind(console);
  console.error = (...args) => { window.ringErrors.push(args.map(String).join(" ")); error(...args); };
})();
</script>"""
END_PROBE = """<script>
window.addEventListener("load", async () => {
  const wait = (ms) => new Promise((done) => setTimeout(done, ms));
  const seen = {};
  await wait(50);
  for (const [path, entry] of Object.entries(results)) {
    app.showResultInfo(path);
    await wait(50);
    const caption = document.querySelector(".prose");
    const view = { caption: caption ? caption.innerText : null, mime: entry.mime_type };
    if (entry.mime_type.startsWith("image/")) {
      app.setView({ content: "img", contentPath: entry.data_uri, resultPath: path });
      await wait(50);
      const img = [...document.querySelectorAll("img")].find((i) => i.src === entry.data_uri);
      if (img && !img.complete) await new Promise((done) => { img.onload = img.onerror = done; });
      view.image = img ? [img.naturalWidth, img.naturalHeight] : null;
    }
    seen[path] = view;
  }
  const first = Object.keys(results).find((p) => p.endsWith("table1.csv")) || Object.keys(results)[0];
  if (first) app.showResultInfo(first);  // the screenshot's view: a table's description, marks beside numbers
  await wait(50);
  const out = document.createElement("pre");
  out.id = "ring-probe";
  out.style.display = "none";
  out.textContent = JSON.stringify({ errors: window.ringErrors, results: seen });
  document.body.appendChild(out);
});
</script>"""


def chromium() -> str:
    """The browser's path, or one sentence saying how to install it."""
    found = shutil.which(CHROMIUM)
    assert found, "chromium is not installed: run `bash .ci/chromium.sh` (Debian's headless Chromium, as CI does)"
    return found


def probed_copy(report: Path, folder: Path) -> Path:
    """A copy of ``report`` in ``folder`` with the probe's scripts added; the report itself is left as written."""
    html = report.read_text()
    head = html.index("<head>") + len("<head>")
    end = html.rindex("</body>")
    copy = folder / "report-probed.html"
    copy.write_text(html[:head] + HEAD_PROBE + html[head:end] + END_PROBE + html[end:])
    return copy


def open_report(report: Path, folder: Path, screenshot: Path) -> dict:
    """``{"errors": [...], "results": {path: {"caption": text as rendered, "mime": ..., "image": [w, h]}}}`` of
    ``report`` opened in Chromium, and its screenshot written to ``screenshot``."""
    browser, copy = chromium(), probed_copy(report, folder)
    profile = folder / "chromium-profile"  # a throwaway profile: nothing of the user's, nothing left in $HOME
    common = [browser, *FLAGS, f"--user-data-dir={profile}"]
    dumped = subprocess.run(
        [*common, "--dump-dom", copy.as_uri()], capture_output=True, text=True, timeout=300, cwd=folder
    )
    assert dumped.returncode == 0, dumped.stderr[-3000:]
    found = re.search(r'<pre id="ring-probe"[^>]*>(.*?)</pre>', dumped.stdout, re.S)
    assert found, f"the report's probe never ran: {dumped.stderr[-2000:]}"
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    shot = subprocess.run(
        [*common, "--window-size=1600,1200", f"--screenshot={screenshot}", copy.as_uri()],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=folder,
    )
    assert shot.returncode == 0 and screenshot.is_file(), shot.stderr[-3000:]
    return json.loads(unescape(found.group(1)))


def artefact(name: str, fallback: Path) -> Path:
    """Where a test writes an artefact for the reader of a CI run: $RING_TEST_ARTEFACTS (.ci/run sets it), else
    ``fallback`` (the test's own folder, kept by pytest when the test fails)."""
    return Path(os.environ.get("RING_TEST_ARTEFACTS", fallback)) / name


def table_rows(md: str) -> list[list[str]]:
    """The cells of each body row of a table's Markdown (not its header or rule)."""
    rows = [line for line in md.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def check_in_browser(report: Path, tables: Path, shown: tuple[str, ...], folder: Path, name: str) -> dict:
    """``report`` opened in Chromium shows every file of ``shown`` (the tables' CSVs, the figures' PNGs) with its
    description, every image loaded, no script error; each table's description holds its ``.md`` under ``tables``
    row for row and its notes, so every mark (diverged [dN], [hN], [uN], *, untested) stands beside its number as in
    the .md.  The screenshot goes to the artefact ``<name>.png``; the probe's reading is returned."""
    seen = open_report(report, folder, artefact(f"{name}.png", folder))
    assert seen["errors"] == [], seen["errors"]
    views = {Path(path).name: view for path, view in seen["results"].items()}
    assert set(shown) <= set(views), sorted(views)
    for file in shown:
        view = views[file]
        assert view["caption"] and view["caption"].strip(), file  # every result described
        if file.endswith(".png"):
            assert view["image"] and min(view["image"]) > 0, (file, view["image"])  # decoded, not a broken image
        md = tables / Path(file).with_suffix(".md").name
        if file.endswith(".csv") and md.is_file() and not file.startswith("gpu_hours"):
            text = md.read_text()
            lines = view["caption"].splitlines()
            for row in (line for line in text.splitlines() if line.startswith("|")):
                assert row in lines, (file, row)  # the .md's row, as the .md prints it
            notes = text.strip().rsplit("\n\n", 1)[-1]
            assert " ".join(notes.split()) in " ".join(view["caption"].split()), (file, notes)
    return seen
