// Light or dark: the system's setting (prefers-color-scheme) until the person picks one with the top bar's
// toggle, which is then remembered in this browser. A classic script in the head, so the page is painted
// in its theme from the start (no flash of the other one); the stylesheets read `html[data-theme]`.
(() => {
  const KEY = "openprogram-theme";
  const system = window.matchMedia("(prefers-color-scheme: dark)");
  const root = document.documentElement;

  function chosen() {
    try {
      const stored = localStorage.getItem(KEY);
      return stored === "dark" || stored === "light" ? stored : null;
    } catch {
      return null; // storage refused (private mode, a policy): the system's setting applies
    }
  }

  function apply() {
    const theme = chosen() || (system.matches ? "dark" : "light");
    root.dataset.theme = theme;
    const toggle = document.querySelector("[data-role=theme-toggle]");
    if (toggle) {
      toggle.setAttribute("aria-pressed", String(theme === "dark"));
      toggle.title = theme === "dark" ? "Switch to the light theme" : "Switch to the dark theme";
    }
  }

  apply();
  system.addEventListener("change", apply); // followed until a theme is picked
  document.addEventListener("DOMContentLoaded", () => {
    apply();
    document.querySelector("[data-role=theme-toggle]")?.addEventListener("click", () => {
      try {
        localStorage.setItem(KEY, root.dataset.theme === "dark" ? "light" : "dark");
      } catch {
        root.dataset.theme = root.dataset.theme === "dark" ? "light" : "dark"; // this page only
        return;
      }
      apply();
    });
  });
})();
