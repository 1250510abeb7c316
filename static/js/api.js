// Calls to the JSON API from pages, with the session cookie and the CSRF token Django expects.

export function csrfToken() {
  const match = document.cookie.split(";").map((c) => c.trim()).find((c) => c.startsWith("csrftoken="));
  return match ? decodeURIComponent(match.slice("csrftoken=".length)) : "";
}

async function request(url, options = {}) {
  const response = await fetch(url, {
    credentials: "same-origin",
    headers: {"Accept": "application/json", "Content-Type": "application/json", "X-CSRFToken": csrfToken()},
    ...options,
  });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const detail = body && (body.detail || JSON.stringify(body));
    throw new Error(`${options.method || "GET"} ${url} failed (${response.status})${detail ? `: ${detail}` : ""}`);
  }
  return body;
}

/** Ask a run to stop; resolves with the session as the server sees it after the request. */
export function stopSession(stopUrl) {
  return request(stopUrl, {method: "POST", body: "{}"});
}

/** Delete an ended session (the server refuses one still queued or running, naming Stop). */
export function deleteSession(sessionUrl) {
  return request(sessionUrl, {method: "DELETE"});
}

/** POST `body` as JSON; resolves with the answer's JSON. */
export function postJson(url, body) {
  return request(url, {method: "POST", body: JSON.stringify(body)});
}

/** Revoke every share link of a session (`/api/sessions/<id>/share/`). */
export function revokeShareLinks(shareUrl) {
  return request(shareUrl, {method: "DELETE"});
}

export function getJson(url) {
  return request(url);
}
