// slogfeed's small page script: copy buttons. Pages work without it.
const copy = async (button) => {
  const text = button.dataset.copy || "";
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch {
    // No clipboard permission (e.g. plain http on another host): select
    // the link's text so that the user can copy it by hand.
    const link = button.previousElementSibling;
    if (link) {
      const range = document.createRange();
      range.selectNodeContents(link);
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
    }
  }
  const label = button.textContent;
  button.textContent = ok ? "Copied" : "Press Ctrl+C";
  button.setAttribute("aria-live", "polite");
  setTimeout(() => {
    button.textContent = label === "Copied" || label === "Press Ctrl+C" ? "Copy" : label;
  }, 1500);
};

document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  if (button) {
    event.preventDefault();
    copy(button);
  }
});
