// The session page's Share button: make a read-only link (shown to copy, with when it expires), and
// revoke every link made so far.

import {postJson, revokeShareLinks} from "./api.js";

/** Wire the Share button and its panel on the session page `root` (absent on a shared page). */
export function wireShareButton(root) {
  const button = root.querySelector("[data-role=share]");
  const panel = root.querySelector("[data-role=share-panel]");
  if (!button || !panel) return;
  const link = panel.querySelector("[data-role=share-link]");
  const expiry = panel.querySelector("[data-role=share-expiry]");
  const revoke = panel.querySelector("[data-role=revoke-shares]");

  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const share = await postJson(button.dataset.shareUrl, {});
      link.value = share.url;
      expiry.textContent = `works until ${new Date(share.expires_at).toLocaleString()}`;
      panel.hidden = false;
      link.select();
    } catch (error) {
      expiry.textContent = `Share failed: ${error.message}`;
      panel.hidden = false;
    } finally {
      button.disabled = false;
    }
  });

  revoke.addEventListener("click", async () => {
    revoke.disabled = true;
    try {
      await revokeShareLinks(button.dataset.shareUrl);
      link.value = "";
      expiry.textContent = "Every link to this session was revoked.";
    } catch (error) {
      expiry.textContent = `Revoke failed: ${error.message}`;
    } finally {
      revoke.disabled = false;
    }
  });
}
