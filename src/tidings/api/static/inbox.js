// tidings' in-app inbox as a web component (docs/inbox.md, The web component).
//   <script src="https://tidings.example/inbox.js"></script>
//   <tidings-inbox base-url="https://tidings.example" user="ana" token="tdu_..."></tidings-inbox>
// No build step, no third-party script. Every text of a message is set as text (never as
// HTML), and an action link is followed only when it is http(s). Themable through CSS
// variables (--tidings-*), keyboard accessible (buttons, Escape closes the list).
(() => {
  "use strict";
  if (customElements.get("tidings-inbox")) return;

  const STYLE = `
    :host { position: relative; display: inline-block; font: var(--tidings-font, 14px/1.4 system-ui, sans-serif);
            color: var(--tidings-fg, #1f2328); }
    button { font: inherit; cursor: pointer; }
    :focus-visible { outline: 2px solid var(--tidings-accent, #0969da); outline-offset: 2px; }
    .bell { position: relative; background: none; border: 0; padding: 6px; line-height: 0; color: inherit; }
    .badge { position: absolute; top: 0; right: 0; min-width: 16px; padding: 0 4px; border-radius: 8px;
             background: var(--tidings-badge-bg, #cf222e); color: var(--tidings-badge-fg, #fff);
             font-size: 11px; line-height: 16px; text-align: center; }
    .badge[hidden] { display: none; }
    .panel { position: absolute; right: 0; top: 100%; z-index: 1000; width: var(--tidings-width, 340px);
             max-height: var(--tidings-max-height, 420px); overflow: auto; background: var(--tidings-bg, #fff);
             border: 1px solid var(--tidings-border, #d0d7de); border-radius: var(--tidings-radius, 8px);
             box-shadow: 0 8px 24px rgba(0,0,0,.15); }
    .panel[hidden] { display: none; }
    header { display: flex; justify-content: space-between; align-items: center; padding: 8px 12px;
             border-bottom: 1px solid var(--tidings-border, #d0d7de); }
    header h2 { margin: 0; font-size: 1em; }
    .link { background: none; border: 0; color: var(--tidings-accent, #0969da); padding: 2px 4px; }
    ul { list-style: none; margin: 0; padding: 0; }
    li { padding: 10px 12px; border-bottom: 1px solid var(--tidings-border, #d0d7de); }
    li.unread { background: var(--tidings-unread-bg, #ddf4ff); }
    .title { font-weight: 600; margin: 0 0 2px; }
    .body { margin: 0 0 4px; white-space: pre-wrap; overflow-wrap: anywhere; }
    .meta { display: flex; gap: 8px; align-items: center; font-size: 12px; color: var(--tidings-muted, #656d76); }
    .empty { padding: 16px 12px; color: var(--tidings-muted, #656d76); }
  `;

  const SAFE_LINK = /^https?:\/\//i;
  const SVG = "http://www.w3.org/2000/svg";

  function bellIcon() {
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("width", "22");
    svg.setAttribute("height", "22");
    svg.setAttribute("aria-hidden", "true");
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("fill", "currentColor");
    path.setAttribute("d", "M12 22a2.5 2.5 0 0 0 2.45-2h-4.9A2.5 2.5 0 0 0 12 22zm7-6V11a7 7 0 0 0-5.5-6.84V3a1.5 1.5 0 0 0-3 0v1.16A7 7 0 0 0 5 11v5l-2 2v1h18v-1l-2-2z");
    svg.append(path);
    return svg;
  }

  class TidingsInbox extends HTMLElement {
    static get observedAttributes() { return ["base-url", "user", "token"]; }

    constructor() {
      super();
      this.items = [];
      this.counts = { unseen: 0, unread: 0, total: 0 };
      this.source = null;
      const root = this.attachShadow({ mode: "open" });
      const style = document.createElement("style");
      style.textContent = STYLE;
      this.bell = this.el("button", "bell");
      this.bell.append(bellIcon());
      this.bell.setAttribute("aria-haspopup", "true");
      this.bell.setAttribute("aria-expanded", "false");
      this.bell.setAttribute("part", "bell");
      this.badge = this.el("span", "badge", "");
      this.badge.setAttribute("part", "badge");
      this.bell.append(this.badge);
      this.panel = this.el("div", "panel");
      this.panel.hidden = true;
      this.panel.setAttribute("role", "dialog");
      this.panel.setAttribute("aria-label", "Notifications");
      const head = document.createElement("header");
      const title = this.el("h2", "", "Notifications");
      this.readAll = this.el("button", "link", "Mark all read");
      head.append(title, this.readAll);
      this.list = document.createElement("ul");
      this.panel.append(head, this.list);
      root.append(style, this.bell, this.panel);
      this.bell.addEventListener("click", () => this.toggle());
      this.readAll.addEventListener("click", () => this.markAll());
      this.panel.addEventListener("keydown", (e) => { if (e.key === "Escape") this.toggle(false); });
      this.bell.addEventListener("keydown", (e) => { if (e.key === "Escape") this.toggle(false); });
    }

    el(tag, cls, text) {
      const node = document.createElement(tag);
      if (cls) node.className = cls;
      if (text !== undefined) node.textContent = text;
      return node;
    }

    connectedCallback() { this.start(); }
    disconnectedCallback() { this.stop(); }
    attributeChangedCallback() { if (this.isConnected) this.start(); }

    get base() { return (this.getAttribute("base-url") || "").replace(/\/+$/, ""); }
    get feed() { return `${this.base}/v1/users/${encodeURIComponent(this.getAttribute("user") || "")}/inbox`; }
    get headers() { return { Authorization: `Bearer ${this.getAttribute("token") || ""}` }; }

    async start() {
      this.stop();
      if (!this.getAttribute("user") || !this.getAttribute("token")) return;
      await this.load();
      this.listen();
    }

    stop() { if (this.source) { this.source.close(); this.source = null; } }

    async load() {
      const answer = await fetch(`${this.feed}?limit=50`, { headers: this.headers });
      if (!answer.ok) { this.fail(answer.status); return; }
      const page = await answer.json();
      this.items = page.items;
      this.setCounts(page.counts);
      this.render();
    }

    listen() {
      const url = `${this.feed}/stream?token=${encodeURIComponent(this.getAttribute("token"))}`;
      this.source = new EventSource(url);
      this.source.addEventListener("message", (e) => {
        const item = JSON.parse(e.data);
        if (!this.items.some((known) => known.id === item.id)) this.items.unshift(item);
        this.render();
        this.dispatchEvent(new CustomEvent("tidings:message", { detail: item }));
      });
      this.source.addEventListener("counts", (e) => {
        this.setCounts(JSON.parse(e.data));
        // Marked elsewhere (another tab, the app's backend): read the list again.
        const unread = this.items.filter((i) => !i.readAt).length;
        if (unread !== this.counts.unread && this.items.length < 50) this.load();
      });
    }

    fail(status) {
      this.list.replaceChildren(this.el("li", "empty", `Notifications unavailable (${status})`));
    }

    setCounts(counts) {
      this.counts = counts;
      this.badge.textContent = counts.unread > 99 ? "99+" : String(counts.unread);
      this.badge.hidden = counts.unread === 0;
      this.bell.setAttribute("aria-label", `Notifications, ${counts.unread} unread`);
    }

    toggle(open) {
      const show = open === undefined ? this.panel.hidden : open;
      this.panel.hidden = !show;
      this.bell.setAttribute("aria-expanded", String(show));
      if (show) {
        const first = this.panel.querySelector("button");
        if (first) first.focus();
        const unseen = this.items.some((i) => !i.seenAt);
        if (unseen) this.post(`${this.feed}/seen-all`);
      } else {
        this.bell.focus();
      }
    }

    render() {
      if (!this.items.length) {
        this.list.replaceChildren(this.el("li", "empty", "Nothing new"));
        return;
      }
      this.list.replaceChildren(...this.items.map((item) => this.row(item)));
    }

    row(item) {
      const li = this.el("li", item.readAt ? "read" : "unread");
      li.dataset.id = item.id;
      if (item.subject) li.append(this.el("p", "title", item.subject));
      li.append(this.el("p", "body", item.text));
      const meta = this.el("div", "meta");
      const time = this.el("time", "", new Date(item.createdAt).toLocaleString());
      time.dateTime = item.createdAt;
      meta.append(time);
      const action = item.data && item.data.actionUrl;
      if (typeof action === "string" && SAFE_LINK.test(action)) {
        const link = this.el("a", "link", "Open");
        link.href = action;
        link.rel = "noopener noreferrer";
        link.target = "_blank";
        link.addEventListener("click", () => this.mark(item, "read"));
        meta.append(link);
      }
      const read = this.el("button", "link", item.readAt ? "Mark unread" : "Mark read");
      read.addEventListener("click", () => this.mark(item, item.readAt ? "unread" : "read"));
      const archive = this.el("button", "link", "Archive");
      archive.addEventListener("click", () => this.mark(item, "archive"));
      meta.append(read, archive);
      li.append(meta);
      return li;
    }

    async post(url) {
      const answer = await fetch(url, { method: "POST", headers: this.headers });
      if (!answer.ok) return null;
      const body = await answer.json();
      this.setCounts(body.counts);
      return body;
    }

    async mark(item, action) {
      const body = await this.post(`${this.feed}/${encodeURIComponent(item.id)}/${action}`);
      if (!body) return;
      this.items = action === "archive"
        ? this.items.filter((i) => i.id !== item.id)
        : this.items.map((i) => (i.id === item.id ? body.item : i));
      this.render();
    }

    async markAll() {
      if (await this.post(`${this.feed}/read-all`)) {
        const now = new Date().toISOString();
        this.items = this.items.map((i) => ({ ...i, readAt: i.readAt || now }));
        this.render();
      }
    }
  }

  customElements.define("tidings-inbox", TidingsInbox);
})();
