// The class report's one script: sorts a table.sortable when a column head is clicked (numbers by
// data-sort, text by content). The page's Content-Security-Policy admits it by its SHA-256 and no other.
for (const table of document.querySelectorAll("table.sortable")) {
  const heads = table.tHead.rows[0].cells;
  for (let col = 0; col < heads.length; col++) {
    heads[col].addEventListener("click", () => {
      const body = table.tBodies[0], down = heads[col].dataset.dir !== "desc";
      const key = (row) => { const c = row.cells[col]; const v = c.dataset.sort;
        return v !== undefined && v !== "" && !isNaN(v) ? Number(v) : c.textContent.trim().toLowerCase(); };
      const rows = Array.from(body.rows).sort((a, b) => {
        const x = key(a), y = key(b); return (x < y ? -1 : x > y ? 1 : 0) * (down ? -1 : 1); });
      for (const h of heads) delete h.dataset.dir;
      heads[col].dataset.dir = down ? "desc" : "asc";
      for (const r of rows) body.appendChild(r);
    });
  }
}
