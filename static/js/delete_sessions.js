// Deleting sessions from the pages: one (the session page, a list row) or the rows picked in the list.
// Each asks for a confirmation first; the server refuses a session still queued or running (stop it
// first), and says so.

import {deleteSession} from "./api.js";

/** Ask to delete the sessions at `urls` (described as `what`), then delete them one by one. Resolves
 * with {deleted: [urls], failed: [[url, message]]}; with null if the person said no. */
export async function confirmAndDelete(urls, what) {
  const their = urls.length === 1 ? "its" : "their";
  if (!urls.length || !window.confirm(`Delete ${what} with all ${their} calls? This cannot be undone.`)) return null;
  const outcome = {deleted: [], failed: []};
  for (const url of urls) {
    try {
      await deleteSession(url);
      outcome.deleted.push(url);
    } catch (error) {
      outcome.failed.push([url, error.message]);
    }
  }
  return outcome;
}
