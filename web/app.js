/*
 * app.js: the lockgate dashboard.  Plain JavaScript, no framework.
 *
 * Rules this file keeps:
 * - Lock data only ever reaches the page as text (textContent or
 *   createTextNode); no string is ever parsed as HTML.  Links only for
 *   http(s) URLs.  There is no inline script (the CSP forbids it).
 * - The bearer token lives in this tab's sessionStorage and is sent only in
 *   the Authorization header: never in a URL, a cookie or a log line.
 * - Liveness: the list is polled every second (POLL_MS) with If-None-Match,
 *   so an unchanged list costs a 304 and no parsing, and a change shows
 *   within about one poll (the tests require under 2 s).  We chose polling
 *   over server-sent events: it works through every proxy and load
 *   balancer, needs no long-lived connection per tab (Cloud Run counts
 *   those against concurrency), and each instance answers from the shared
 *   store, so a change made through any instance shows.
 * - Countdowns tick every second against the server's clock: each list
 *   answer carries the store's "now", and we keep its offset from ours.
 * - Paging renders one page of rows at a time; the full list (up to
 *   MAX_LOCKS) is kept in memory for client-side search and sort, which
 *   stays fast at 10,000 locks.
 */
'use strict';

(function () {
	const POLL_MS = 1000;          /* list poll period */
	const POLL_MAX_MS = 5000;      /* backoff cap while the server is down */
	const POLL_HIDDEN_MS = 15000;  /* while the tab is in the background */
	const FETCH_TIMEOUT_MS = 5000; /* one request */
	const PAGE_SIZE_API = 1000;    /* locks per list request (API max) */
	const MAX_PAGES = 50;          /* list requests per poll */
	const MAX_LOCKS = PAGE_SIZE_API * MAX_PAGES;
	const EVENTS_MAX = 100;        /* timeline entries asked for */
	const SOON_FRACTION = 0.25;    /* "expiring soon": under ttl/4 left */
	const SOON_MIN_S = 5;          /* ... or under 5 s */
	const PREFIX_DEBOUNCE_MS = 300;
	const TOKEN_KEY = 'lockgate.token';

	const $ = (id) => document.getElementById(id);

	const st = {
		whoami: null,       /* {owner, admin, public_read} */
		locks: [],          /* every lock of the current prefix */
		view: [],           /* locks after search and sort */
		viewDirty: true,
		offsetMs: 0,        /* server now - our now */
		pages: new Map(),   /* page_token -> {etag, body} */
		prefix: '',
		search: '',
		sortKey: 'name',
		sortDir: 1,
		page: 0,
		pageSize: 50,
		timer: null,
		failures: 0,
		downSince: null,
		rowCells: [],       /* [{lock, expires, acquired, refreshed, state}] */
		detail: null,       /* name shown in the detail view */
		detailLock: null,
		needToken: false,
		loaded: false,      /* a list answer arrived for this prefix */
		lastError: '',      /* why the last poll failed, '' when it did not */
	};

	/* ---------- token ---------- */

	function getToken() {
		try {
			return sessionStorage.getItem(TOKEN_KEY) || '';
		} catch (e) {
			return '';
		}
	}

	function setToken(tok) {
		try {
			if (tok)
				sessionStorage.setItem(TOKEN_KEY, tok);
			else
				sessionStorage.removeItem(TOKEN_KEY);
		} catch (e) {
			/* storage disabled: the token lasts until reload */
		}
	}

	/* ---------- HTTP ---------- */

	class ApiError extends Error {
		constructor(status, code, message) {
			super(message);
			this.status = status;
			this.code = code;
		}
	}

	/* The lock name in a URL path: each segment encoded, '/' kept. */
	function lockPath(name) {
		return '/v1/locks/' + name.split('/').map(encodeURIComponent).join('/');
	}

	async function api(method, path, etag) {
		const headers = { 'Accept': 'application/json' };
		const tok = getToken();
		if (tok)
			headers['Authorization'] = 'Bearer ' + tok;
		if (etag)
			headers['If-None-Match'] = etag;
		const ctl = new AbortController();
		const t = setTimeout(() => ctl.abort(), FETCH_TIMEOUT_MS);
		let res;
		try {
			res = await fetch(path, {
				method, headers, signal: ctl.signal,
				cache: 'no-store', credentials: 'omit',
				referrerPolicy: 'no-referrer',
			});
		} catch (e) {
			throw new ApiError(0, 'unreachable',
			    'lockgate is not answering (' +
			    (e.name === 'AbortError' ? 'timed out' : 'network error') +
			    ').');
		} finally {
			clearTimeout(t);
		}
		if (res.status === 304 || res.status === 204)
			return { status: res.status, etag: res.headers.get('ETag'), body: null };
		let body = null;
		try {
			body = await res.json();
		} catch (e) {
			body = null;
		}
		if (!res.ok) {
			const err = body && body.error ? body.error : {};
			throw new ApiError(res.status, err.code || 'http_' + res.status,
			    err.message || 'lockgate answered HTTP ' + res.status + '.');
		}
		return { status: res.status, etag: res.headers.get('ETag'), body };
	}

	/* ---------- formatting ---------- */

	function now() {
		return Date.now() + st.offsetMs;
	}

	function ms(s) {
		const v = Date.parse(s);
		return Number.isFinite(v) ? v : NaN;
	}

	function dur(sec) {
		sec = Math.max(0, Math.floor(sec));
		const d = Math.floor(sec / 86400), h = Math.floor(sec / 3600) % 24;
		const m = Math.floor(sec / 60) % 60, s = sec % 60;
		if (d > 0)
			return d + 'd ' + h + 'h';
		if (h > 0)
			return h + 'h ' + m + 'm';
		if (m > 0)
			return m + 'm ' + String(s).padStart(2, '0') + 's';
		return s + 's';
	}

	function ago(t) {
		if (!Number.isFinite(t))
			return '—';
		const sec = (now() - t) / 1000;
		if (sec < 1)
			return 'just now';
		return dur(sec) + ' ago';
	}

	function countdown(l) {
		if (!Number.isFinite(l._exp))
			return '—';
		const left = (l._exp - now()) / 1000;
		if (left <= 0)
			return 'expired ' + dur(-left) + ' ago';
		return dur(Math.ceil(left));
	}

	function stateOf(l) {
		const left = (l._exp - now()) / 1000;
		if (l.state === 'expired' || left <= 0)
			return { key: 'expired', rank: 3, text: 'expired, awaiting takeover' };
		if (l.overdue)
			return { key: 'overdue', rank: 2, text: 'overdue' };
		const ttl = Number(l.ttl) || 0;
		if (left < Math.max(SOON_MIN_S, ttl * SOON_FRACTION))
			return { key: 'soon', rank: 1, text: 'expiring soon' };
		return { key: 'held', rank: 0, text: 'held' };
	}

	function labelText(labels) {
		if (!labels || typeof labels !== 'object')
			return '';
		return Object.keys(labels).sort().map((k) => k + '=' + labels[k]).join(' ');
	}

	function isUrl(s) {
		if (typeof s !== 'string' || !/^https?:\/\//i.test(s))
			return false;
		try {
			const u = new URL(s);
			return u.protocol === 'http:' || u.protocol === 'https:';
		} catch (e) {
			return false;
		}
	}

	function str(v) {
		return v === null || v === undefined ? '' : String(v);
	}

	/* An element with text content only. */
	function el(tag, text, cls) {
		const e = document.createElement(tag);
		if (text !== undefined && text !== null)
			e.textContent = String(text);
		if (cls)
			e.className = cls;
		return e;
	}

	/* A caller's text, isolated for bidi (<bdi>): a right-to-left override
	 * or mark in it reorders only itself, never the page's text around it
	 * (a holder ending in U+202E would otherwise turn the fencing token 37
	 * written after it into 73). */
	function iso(text) {
		return el('bdi', str(text));
	}

	/* KEY=VALUE of a label or claim, each part isolated. */
	function pairNode(k, v, cls) {
		const e = el('span', null, cls);
		e.append(iso(k), '=', iso(v));
		return e;
	}

	/* The pairs of OBJ (labels, claims) by key, a space apart; objects
	 * and arrays among the values as JSON. */
	function pairsNode(obj) {
		const e = document.createElement('span');
		Object.keys(obj).sort().forEach((k, i) => {
			const v = obj[k];
			if (i)
				e.append(' ');
			e.appendChild(pairNode(k, v !== null && typeof v === 'object' ?
			    JSON.stringify(v) : v));
		});
		return e;
	}

	/* A URL the dashboard may link to: http(s) on a host the server names
	 * (LOCKGATE_LINK_HOSTS).  Any other holder that looks like a URL is
	 * shown as text: a lock holder's text must not send readers to a
	 * page of its choosing. */
	function linkable(s) {
		if (!isUrl(s))
			return false;
		const hosts = (st.whoami && st.whoami.link_hosts) || [];
		return hosts.includes(new URL(s).host.toLowerCase());
	}

	function holderNode(holder) {
		if (linkable(holder)) {
			const a = el('a', holder);
			a.href = holder;
			a.rel = 'noopener noreferrer';
			a.target = '_blank';
			return a;
		}
		return document.createTextNode(str(holder));
	}

	/* ---------- messages ---------- */

	function banner(text, kind) {
		const b = $('banner');
		if (!text) {
			b.hidden = true;
			b.textContent = '';
			return;
		}
		b.textContent = text;
		b.dataset.kind = kind || 'error';
		b.hidden = false;
	}

	function setLive(text, kind) {
		const l = $('live');
		l.textContent = text;
		l.dataset.kind = kind;
	}

	function explain(err) {
		switch (err.status) {
		case 401:
			return 'Not signed in, or the token was refused: ' + err.message;
		case 403:
			return 'Not allowed: ' + err.message;
		case 0:
			return err.message;
		default:
			return err.message + ' (HTTP ' + err.status + ')';
		}
	}

	/* ---------- data ---------- */

	function prepare(l) {
		l._exp = ms(l.expires_at);
		l._acq = ms(l.acquired_at);
		l._ref = ms(l.refreshed_at);
		l._labels = labelText(l.labels);
		l._hay = [l.name, l.owner, l.holder, l.purpose, l._labels,
		    l.fencing_token].map(str).join('\n').toLowerCase();
		return l;
	}

	/* Every page of the list for the current prefix; pages that did not
	 * change come back as 304 and are taken from st.pages. */
	async function fetchAll() {
		const prefix = st.prefix;
		const seen = new Map();
		let token = '', changed = false, out = [], nowMs = null;
		for (let i = 0; i < MAX_PAGES; i++) {
			const q = new URLSearchParams();
			if (prefix)
				q.set('prefix', prefix);
			q.set('page_size', String(PAGE_SIZE_API));
			q.set('include_expired', 'true');
			if (token)
				q.set('page_token', token);
			const cached = st.pages.get(token);
			const r = await api('GET', '/v1/locks?' + q.toString(),
			    cached ? cached.etag : null);
			let page;
			if (r.status === 304 && cached) {
				page = cached;
			} else {
				changed = true;
				page = { etag: r.etag, body: r.body || {} };
				/* an empty page's "now" may not come from the store */
				if (Array.isArray(page.body.locks) && page.body.locks.length)
					nowMs = ms(page.body.now);
			}
			seen.set(token, page);
			const locks = Array.isArray(page.body.locks) ? page.body.locks : [];
			for (const l of locks)
				out.push(l);
			token = page.body.next_page_token || '';
			if (!token)
				break;
		}
		if (prefix !== st.prefix)
			return; /* the filter changed under us: the next poll redoes it */
		if (seen.size !== st.pages.size)
			changed = true;
		st.pages = seen;
		if (!st.loaded) {
			st.loaded = true;
			changed = true;
		}
		if (Number.isFinite(nowMs))
			st.offsetMs = nowMs - Date.now();
		if (!changed)
			return;
		st.locks = out.slice(0, MAX_LOCKS).map(prepare);
		st.viewDirty = true;
		render();
		if (st.detail)
			loadEvents(st.detail);
	}

	async function poll() {
		st.timer = null;
		try {
			await fetchAll();
			st.failures = 0;
			st.downSince = null;
			st.needToken = false;
			st.lastError = '';
			setLive('live', 'ok');
			banner('');
		} catch (err) {
			st.failures++;
			st.lastError = explain(err);
			if (err.status === 0) {
				if (!st.downSince)
					st.downSince = new Date();
				setLive('not answering', 'down');
				banner('lockgate is not answering since ' +
				    st.downSince.toLocaleTimeString() +
				    '; retrying. The table shows the last data received.');
			} else if (err.status === 401) {
				setLive('signed out', 'down');
				banner(explain(err) + ' Sign in with a token to see the locks.');
				clearData();
				if (!st.needToken) {
					st.needToken = true;
					askToken('Reading locks needs a token. ' + err.message);
				}
			} else if (err.status === 403) {
				setLive('forbidden', 'down');
				banner(explain(err) + ' Your token may not read these locks.');
				clearData();
			} else {
				setLive('error', 'down');
				banner(explain(err));
			}
			if (!st.loaded)
				render(); /* say why the table is empty */
		}
		schedule();
	}

	function schedule(delay) {
		if (st.timer)
			clearTimeout(st.timer);
		if (delay === undefined)
			delay = st.failures === 0 ? POLL_MS :
			    Math.min(POLL_MAX_MS, POLL_MS * 2 ** Math.min(st.failures, 3));
		/* a background tab polls rarely; coming back polls at once */
		if (document.hidden)
			delay = Math.max(delay, POLL_HIDDEN_MS);
		st.timer = setTimeout(poll, delay);
	}

	function pollNow() {
		if (st.timer)
			clearTimeout(st.timer);
		st.timer = setTimeout(poll, 0);
	}

	function clearData() {
		st.locks = [];
		st.pages = new Map();
		st.loaded = false;
		st.viewDirty = true;
		render();
	}

	/* ---------- view ---------- */

	const SORTERS = {
		name: (l) => l.name,
		owner: (l) => str(l.owner),
		holder: (l) => str(l.holder),
		purpose: (l) => str(l.purpose),
		labels: (l) => l._labels,
		acquired: (l) => l._acq,
		expires: (l) => l._exp,
		refreshed: (l) => l._ref,
		token: (l) => l.fencing_token,
		state: (l) => stateOf(l).rank,
	};

	function cmpTokens(a, b) {
		a = str(a);
		b = str(b);
		return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
	}

	function compare(a, b) {
		const key = st.sortKey, f = SORTERS[key];
		let r;
		if (key === 'token') {
			r = cmpTokens(a.fencing_token, b.fencing_token);
		} else {
			const x = f(a), y = f(b);
			if (typeof x === 'number' || typeof y === 'number') {
				const nx = Number.isFinite(x) ? x : -Infinity;
				const ny = Number.isFinite(y) ? y : -Infinity;
				r = nx - ny;
			} else {
				r = x < y ? -1 : x > y ? 1 : 0;
			}
		}
		if (r === 0 && key !== 'name')
			r = a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
		return r * st.sortDir;
	}

	function buildView() {
		const q = st.search.trim().toLowerCase();
		const words = q ? q.split(/\s+/) : [];
		const v = words.length ?
		    st.locks.filter((l) => words.every((w) => l._hay.includes(w))) :
		    st.locks.slice();
		v.sort(compare);
		st.view = v;
		st.viewDirty = false;
	}

	function render() {
		/* the "state" order changes with time: resort on every render */
		if (st.viewDirty || st.sortKey === 'state')
			buildView();
		const pages = Math.max(1, Math.ceil(st.view.length / st.pageSize));
		if (st.page >= pages)
			st.page = pages - 1;
		const start = st.page * st.pageSize;
		const slice = st.view.slice(start, start + st.pageSize);

		const active = document.activeElement;
		const refocus = active && active.dataset && active.dataset.lock;

		const body = $('rows');
		const frag = document.createDocumentFragment();
		st.rowCells = [];
		for (const l of slice)
			frag.appendChild(renderRow(l));
		body.replaceChildren(frag);

		if (refocus) {
			for (const b of body.querySelectorAll('button[data-lock]'))
				if (b.dataset.lock === refocus) {
					b.focus();
					break;
				}
		}

		const empty = $('empty');
		if (st.view.length === 0) {
			empty.textContent = st.needToken ? 'Sign in to see the locks.' :
			    !st.loaded ? (st.lastError ? 'Could not load the locks. ' +
			    st.lastError : 'Loading locks…') :
			    st.locks.length === 0 ?
			    (st.prefix ? 'No lock is held under “' + st.prefix + '”.' :
			    'No locks are held right now.') :
			    'No lock matches “' + st.search.trim() + '”.';
			empty.hidden = false;
		} else {
			empty.hidden = true;
		}
		$('summary').textContent = st.view.length === 0 ? '0 locks' :
		    (start + 1) + '–' + (start + slice.length) + ' of ' +
		    st.view.length + (st.view.length !== st.locks.length ?
		    ' (filtered from ' + st.locks.length + ')' : '') +
		    (st.locks.length >= MAX_LOCKS ? ' (list cut at ' + MAX_LOCKS + ')' : '');
		$('prev').disabled = st.page === 0;
		$('next').disabled = st.page >= pages - 1;

		for (const th of document.querySelectorAll('#locks th')) {
			th.setAttribute('aria-sort', th.dataset.key === st.sortKey ?
			    (st.sortDir > 0 ? 'ascending' : 'descending') : 'none');
		}
		if (st.detail)
			refreshDetailFromList();
	}

	/* A cell of TR labelled LABEL (the phone layout shows it); returns the
	 * one span that holds the cell's content. */
	function td(tr, label, cls) {
		const c = el('td', null, cls);
		c.dataset.label = label;
		const v = el('span', null, 'v');
		c.appendChild(v);
		tr.appendChild(c);
		return v;
	}

	function renderRow(l) {
		const tr = document.createElement('tr');
		tr.dataset.name = l.name;

		const b = el('button', l.name, 'linkish');
		b.type = 'button';
		b.dataset.lock = l.name;
		b.title = 'Details and timeline of ' + l.name;
		td(tr, 'Name', 'name').appendChild(b);
		td(tr, 'Owner', 'owner').textContent = str(l.owner);
		td(tr, 'Holder', 'holder').appendChild(holderNode(l.holder));
		td(tr, 'Purpose', 'purpose').textContent = str(l.purpose);
		const labels = td(tr, 'Labels', 'labels');
		if (l.labels && typeof l.labels === 'object')
			for (const k of Object.keys(l.labels).sort())
				labels.appendChild(pairNode(k, l.labels[k], 'chip'));
		const acq = td(tr, 'Acquired', 'acquired');
		acq.title = str(l.acquired_at);
		const exp = td(tr, 'Expires in', 'expires');
		exp.title = str(l.expires_at);
		const ref = td(tr, 'Last refresh', 'refreshed');
		ref.title = str(l.refreshed_at);
		td(tr, 'Fencing token', 'token').textContent = str(l.fencing_token);
		const badge = el('span', '', 'badge');
		td(tr, 'State', 'state').appendChild(badge);

		const cells = { lock: l, tr, acquired: acq, expires: exp,
		    refreshed: ref, badge };
		st.rowCells.push(cells);
		tick1(cells);
		return tr;
	}

	/* The time-dependent cells of one row. */
	function tick1(c) {
		const l = c.lock, s = stateOf(l);
		c.acquired.textContent = ago(l._acq);
		c.expires.textContent = countdown(l);
		c.refreshed.textContent = ago(l._ref);
		c.badge.textContent = s.text;
		c.badge.dataset.state = s.key;
		c.tr.dataset.state = s.key;
	}

	/* Every second: countdowns and relative times of the visible rows. */
	function tick() {
		if (st.sortKey === 'state' && st.view.length > 0) {
			render();
			return;
		}
		for (const c of st.rowCells)
			tick1(c);
		if (st.detail && st.detailLock)
			fillDetail(st.detailLock, false);
	}

	/* ---------- detail ---------- */

	function openDetail(name) {
		st.detail = name;
		st.detailLock = st.locks.find((l) => l.name === name) || null;
		$('detailtitle').textContent = name;
		$('detailmsg').hidden = true;
		$('timeline').replaceChildren();
		if (st.detailLock)
			fillDetail(st.detailLock, true);
		const d = $('detaildlg');
		if (!d.open)
			d.showModal();
		loadDetail();
	}

	function closeDetail() {
		st.detail = null;
		st.detailLock = null;
		const d = $('detaildlg');
		if (d.open)
			d.close();
	}

	function detailMsg(text, kind) {
		const m = $('detailmsg');
		m.textContent = text;
		m.dataset.kind = kind || 'error';
		m.hidden = !text;
	}

	async function loadDetail() {
		const name = st.detail;
		if (!name)
			return;
		try {
			const r = await api('GET', lockPath(name));
			if (st.detail !== name)
				return;
			st.detailLock = prepare(r.body);
			$('detailnote').hidden = true;
			fillDetail(st.detailLock, true);
		} catch (err) {
			if (st.detail !== name)
				return;
			if (err.status === 404) {
				const n = $('detailnote');
				n.textContent = 'This lock is not held now' +
				    (st.detailLock ? ' (what follows is the last state seen).' : '.');
				n.hidden = false;
				if (!st.detailLock)
					$('detailfields').replaceChildren();
			} else {
				detailMsg(explain(err));
			}
		}
		loadEvents(name);
	}

	async function loadEvents(name) {
		try {
			const r = await api('GET', lockPath(name) + ':events?max=' + EVENTS_MAX);
			if (st.detail !== name)
				return;
			renderTimeline(r.body && Array.isArray(r.body.events) ? r.body.events : []);
		} catch (err) {
			if (st.detail !== name)
				return;
			const ol = $('timeline');
			ol.replaceChildren(el('li', 'Timeline unavailable: ' + explain(err), 'muted'));
		}
	}

	const KIND_TEXT = {
		acquired: 'acquired',
		refreshed: 'refreshed',
		released: 'released',
		takeover: 'taken over after expiry',
		force_released: 'force-released',
		lost: 'lease lost',
	};

	function renderTimeline(events) {
		const ol = $('timeline');
		const frag = document.createDocumentFragment();
		if (events.length === 0)
			frag.appendChild(el('li', 'No events seen by this instance yet.', 'muted'));
		for (const e of events) {
			const li = el('li', null, 'ev');
			li.dataset.kind = str(e.kind);
			const t = el('time', ago(ms(e.at)));
			t.dateTime = str(e.at);
			t.title = str(e.at);
			li.appendChild(t);
			let what = KIND_TEXT[e.kind] || str(e.kind);
			if (e.kind === 'refreshed' && e.count > 1)
				what += ' ×' + e.count;
			li.appendChild(el('strong', ' ' + what));
			const who = [];
			if (e.owner)
				who.push(['owner ', e.owner]);
			if (e.holder)
				who.push(['holder ', e.holder]);
			if (e.actor && e.actor !== e.owner)
				who.push(['by ', e.actor]);
			if (e.fencing_token)
				who.push(['token ', e.fencing_token]);
			if (who.length) {
				const span = el('span', ' — ', 'muted');
				who.forEach(([what, v], i) => {
					if (i)
						span.append(', ');
					span.append(what, iso(v));
				});
				li.appendChild(span);
			}
			frag.appendChild(li);
		}
		ol.replaceChildren(frag);
	}

	function field(dl, name, valueNode) {
		dl.appendChild(el('dt', name));
		const dd = document.createElement('dd');
		if (typeof valueNode === 'string')
			dd.textContent = valueNode;
		else
			dd.appendChild(valueNode);
		dl.appendChild(dd);
	}

	function fillDetail(l, full) {
		const dl = $('detailfields');
		const s = stateOf(l);
		const frag = document.createDocumentFragment();
		const tmp = document.createElement('div');
		field(tmp, 'State', s.text);
		field(tmp, 'Owner', str(l.owner));
		field(tmp, 'Holder', holderNode(l.holder));
		field(tmp, 'Purpose', str(l.purpose));
		field(tmp, 'Labels', l.labels && typeof l.labels === 'object' &&
		    Object.keys(l.labels).length ? pairsNode(l.labels) : '—');
		if (l.claims && typeof l.claims === 'object' && Object.keys(l.claims).length)
			field(tmp, 'Claims', pairsNode(l.claims));
		field(tmp, 'Fencing token', str(l.fencing_token));
		field(tmp, 'Acquired', str(l.acquired_at) + ' (' + ago(l._acq) + ')');
		field(tmp, 'Last refresh', str(l.refreshed_at) + ' (' + ago(l._ref) + ')');
		field(tmp, 'Expires', str(l.expires_at) + ' (' + countdown(l) + ')');
		field(tmp, 'TTL', str(l.ttl) + ' s');
		if (l.expected_duration)
			field(tmp, 'Expected duration', dur(l.expected_duration) +
			    (l.overdue ? ' (overdue)' : ''));
		while (tmp.firstChild)
			frag.appendChild(tmp.firstChild);
		dl.replaceChildren(frag);
		if (full)
			fillForce(l);
	}

	function fillForce(l) {
		const box = $('forcebox');
		const admin = !!(st.whoami && st.whoami.admin);
		box.hidden = false;
		$('force').disabled = !admin;
		const hint = $('forcehint');
		hint.replaceChildren();
		if (!admin && st.whoami && st.whoami.owner)
			hint.append('Only an admin can force-release a lock; you are ' +
			    'signed in as ', iso(st.whoami.owner), '.');
		else if (!admin)
			hint.append('Only an admin can force-release a lock; sign in ' +
			    'with an admin token.');
		box.dataset.for = l.name;
	}

	function refreshDetailFromList() {
		const l = st.locks.find((x) => x.name === st.detail);
		if (l) {
			st.detailLock = l;
			$('detailnote').hidden = true;
			fillDetail(l, false);
		} else if (st.detailLock) {
			const n = $('detailnote');
			n.textContent = 'This lock is not held now (what follows is the last state seen).';
			n.hidden = false;
		}
	}

	function confirmForce() {
		const l = st.detailLock;
		if (!l)
			return;
		const text = $('confirmtext');
		text.replaceChildren();
		text.appendChild(document.createTextNode('Force release '));
		text.appendChild(el('strong', l.name));
		text.appendChild(document.createTextNode(', held by '));
		const holder = el('strong', l.holder ? null : '(no holder given)');
		if (l.holder)
			holder.appendChild(iso(l.holder));
		text.append(holder, ' (owner ', iso(l.owner), ', fencing token ' +
		    str(l.fencing_token) + ')? ' +
		    'Its holder loses the lease at once and may still be working.');
		st.forceToken = l.fencing_token; /* the lease the admin saw */
		const d = $('confirmdlg');
		d.returnValue = '';
		d.showModal();
	}

	/* Only the lease shown is removed: if another holds the lock by now,
	 * the server refuses (409) rather than end the new holder's lease. */
	async function doForce(name, token) {
		detailMsg('');
		try {
			const q = token ? '?fencing_token=' + encodeURIComponent(token) : '';
			await api('POST', lockPath(name) + ':forceRelease' + q);
			detailMsg('Force-released ' + name + '.', 'ok');
			pollNow();
			loadEvents(name);
		} catch (err) {
			if (err.status === 404)
				detailMsg('Not held any more: ' + err.message, 'info');
			else if (err.status === 409)
				detailMsg('Not released: ' + err.message, 'info');
			else if (err.status === 403)
				detailMsg('Refused (403): ' + err.message);
			else
				detailMsg(explain(err));
		}
	}

	/* ---------- sign in ---------- */

	function askToken(why) {
		$('tokenwhy').textContent = why || 'Paste a bearer token to read locks.';
		$('tokeninput').value = '';
		const d = $('tokendlg');
		if (!d.open)
			d.showModal();
		$('tokeninput').focus();
	}

	async function loadWhoami() {
		try {
			const r = await api('GET', '/v1/whoami');
			st.whoami = r.body;
		} catch (err) {
			st.whoami = null;
			if (err.status === 401 && !st.needToken) {
				st.needToken = true;
				askToken(getToken() ? 'The saved token was refused: ' +
				    err.message : 'This lockgate needs a token to show its locks.');
			}
		}
		showWho();
	}

	function showWho() {
		const w = st.whoami, tok = getToken();
		const who = $('who');
		who.replaceChildren();
		if (w && w.owner)
			who.append(iso(w.owner), w.admin ? ' (admin)' : '');
		else if (w && w.public_read)
			who.append('public read');
		$('signin').hidden = !!(w && w.owner);
		$('signout').hidden = !tok;
		if (st.detail && st.detailLock)
			fillForce(st.detailLock);
	}

	async function signedIn() {
		st.needToken = false;
		st.pages = new Map(); /* other rights may see other locks */
		await loadWhoami();
		pollNow();
	}

	/* ---------- wiring ---------- */

	function wire() {
		$('signin').addEventListener('click', () => askToken(
		    'Paste a bearer token (an admin token can force-release).'));
		$('signout').addEventListener('click', () => {
			setToken('');
			st.whoami = null;
			clearData();
			signedIn();
		});
		$('tokenform').addEventListener('submit', (ev) => {
			const tok = $('tokeninput').value.trim().replace(/^Bearer\s+/i, '');
			if (!tok) {
				ev.preventDefault();
				return;
			}
			setToken(tok);
			$('tokeninput').value = '';
			signedIn();
		});
		$('tokencancel').addEventListener('click', () => $('tokendlg').close());

		let prefixTimer = null;
		$('prefix').addEventListener('input', () => {
			clearTimeout(prefixTimer);
			prefixTimer = setTimeout(() => {
				const p = $('prefix').value.trim();
				if (p === st.prefix)
					return;
				st.prefix = p;
				st.page = 0;
				st.pages = new Map();
				st.loaded = false;
				pollNow();
			}, PREFIX_DEBOUNCE_MS);
		});
		$('search').addEventListener('input', () => {
			st.search = $('search').value;
			st.page = 0;
			st.viewDirty = true;
			render();
		});
		$('filters').addEventListener('submit', (ev) => ev.preventDefault());
		$('pagesize').addEventListener('change', () => {
			st.pageSize = Number($('pagesize').value) || 50;
			st.page = 0;
			render();
		});
		$('prev').addEventListener('click', () => {
			st.page = Math.max(0, st.page - 1);
			render();
		});
		$('next').addEventListener('click', () => {
			st.page++;
			render();
		});
		for (const th of document.querySelectorAll('#locks th')) {
			th.querySelector('button').addEventListener('click', () => {
				const k = th.dataset.key;
				if (st.sortKey === k)
					st.sortDir = -st.sortDir;
				else {
					st.sortKey = k;
					st.sortDir = 1;
				}
				st.viewDirty = true;
				render();
			});
		}
		$('rows').addEventListener('click', (ev) => {
			const b = ev.target.closest('button[data-lock]');
			if (b)
				openDetail(b.dataset.lock);
		});
		$('detailclose').addEventListener('click', closeDetail);
		$('detaildlg').addEventListener('close', () => {
			/* The event comes a frame after close(): by then another
			 * lock's detail may be open, and it is not this event's. */
			if ($('detaildlg').open)
				return;
			st.detail = null;
			st.detailLock = null;
		});
		$('force').addEventListener('click', confirmForce);
		$('confirmdlg').addEventListener('close', () => {
			const d = $('confirmdlg');
			if (d.returnValue === 'force' && st.detail)
				doForce(st.detail, st.forceToken);
		});
		document.addEventListener('keydown', (ev) => {
			if (ev.key === '/' && !ev.ctrlKey && !ev.metaKey &&
			    !(ev.target instanceof HTMLInputElement) &&
			    !(ev.target instanceof HTMLTextAreaElement) &&
			    !document.querySelector('dialog[open]')) {
				ev.preventDefault();
				$('search').focus();
			}
		});
		document.addEventListener('visibilitychange', () => {
			if (!document.hidden)
				pollNow();
		});
		setInterval(tick, 1000);
	}

	async function start() {
		wire();
		render();
		await loadWhoami();
		poll();
	}

	if (document.readyState === 'loading')
		document.addEventListener('DOMContentLoaded', start);
	else
		start();
})();
