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
 * - The page never states what it does not know.  st.conn says whether
 *   the last poll succeeded; while it did not (the server is not
 *   answering, the token was refused), every view says so: rows and the
 *   detail show the last state seen "as of" its time, countdowns stop,
 *   badges say "last seen", and force release is off.  A refused token is
 *   no longer sent (st.refused), so what public read allows still shows.
 * - The detail view has one source of truth, st.dv (held, gone, unknown),
 *   fed by the list, the inspect answer and our own force release; its
 *   note, fields, countdown and button are all drawn from it.
 * - What is shown (filters, sort, grouping, the open lock) is in the URL:
 *   ?q=&prefix=&state=&sort=&group=&rows= and #/locks/NAME.
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
	const CLAMP_CHARS = 80;        /* longer holder/purpose: clamped */
	const LONG_SEGMENT = 24;       /* a name segment or chip that may break */
	const REASON_MAX = 256;        /* bytes, as the server's API_REASON_MAX */
	const NAME_MAX = 256;          /* bytes, as the server's API_NAME_MAX */
	const TOKEN_KEY = 'lockgate.token';
	const SORTS = ['urgency', 'name', 'owner', 'holder', 'purpose', 'labels',
	    'acquired', 'expires', 'refreshed', 'token'];
	const STATES = ['held', 'soon', 'overdue', 'expired'];

	const $ = (id) => document.getElementById(id);

	const st = {
		whoami: null,       /* {owner, admin, public_read, link_hosts} */
		refused: '',        /* why the saved token was refused; not sent */
		locks: [],          /* every lock of the current prefix */
		byName: new Map(),
		view: [],           /* locks after search, state filter and sort */
		items: [],          /* view with group headers: what pages show */
		counts: {},
		viewDirty: true,
		offsetMs: 0,        /* server now - our now */
		pages: new Map(),   /* page_token -> {etag, body} */
		prefix: '',
		search: '',
		stateFilter: '',
		sortKey: 'urgency',
		sortDir: 1,
		group: 0,           /* group by this many leading name segments */
		collapsed: new Set(),
		expanded: new Set(),/* cells whose long text is shown whole */
		page: 0,
		pageSize: 50,
		timer: null,
		failures: 0,
		conn: 'connecting', /* ok, down, auth, forbidden, error */
		connMsg: '',
		downSince: null,    /* Date the trouble began */
		asOf: null,         /* Date of the last list answer */
		rowCells: [],
		rowsKey: '',
		detail: null,       /* name shown in the detail view */
		dv: null,           /* {status: held|gone|unknown|loading, lock, seen, checked, why} */
		pendingDetail: null,/* from the URL, opened once we may read */
		needToken: false,
		asked: false,
		loaded: false,      /* a list answer arrived for this prefix */
		dataVersion: 0,
		forced: new Set(),  /* "name\ntoken" of leases we force-released */
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

	/* The token to send: none once the server refused it. */
	function usableToken() {
		return st.refused ? '' : getToken();
	}

	/* ---------- HTTP ---------- */

	class ApiError extends Error {
		constructor(status, code, message, sentToken) {
			super(message);
			this.status = status;
			this.code = code;
			this.sentToken = sentToken;
		}
	}

	/* The lock name in a URL path: each segment encoded, '/' kept. */
	function lockPath(name) {
		return '/v1/locks/' + name.split('/').map(encodeURIComponent).join('/');
	}

	async function api(method, path, etag) {
		const headers = { 'Accept': 'application/json' };
		const tok = usableToken();
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
			    ')', !!tok);
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
			    err.message || 'lockgate answered HTTP ' + res.status, !!tok);
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

	/* A duration to the minute once past one ("12m", "1h 5m"). */
	function durShort(sec) {
		sec = Math.max(0, Math.floor(sec));
		if (sec < 60)
			return sec + 's';
		if (sec < 3600)
			return Math.floor(sec / 60) + 'm';
		return dur(sec);
	}

	/* HH:MM:SS on this computer's clock. */
	function clock(t) {
		const d = t instanceof Date ? t : new Date(t);
		if (!Number.isFinite(d.getTime()))
			return '—';
		return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit',
		    second: '2-digit', hour12: false });
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

	/* The state of L at T: key, rank (urgency), text, and "late", which
	 * orders locks of one rank (larger is more urgent). */
	function stateOf(l, t) {
		if (t === undefined)
			t = now();
		const left = (l._exp - t) / 1000;
		if (l.state === 'expired' || left <= 0)
			return { key: 'expired', rank: 3, text: 'expired, awaiting takeover',
			    late: Number.isFinite(left) ? -left : 0 };
		const exp = Number(l.expected_duration) || 0;
		const over = exp > 0 && Number.isFinite(l._acq) ?
		    (t - l._acq) / 1000 - exp : -1;
		if (l.overdue || over > 0)
			return { key: 'overdue', rank: 2, text: 'overdue',
			    late: Math.max(0, over),
			    more: 'by ' + durShort(Math.max(0, over)) +
			    ' (expected ' + durShort(exp) + ')' };
		const ttl = Number(l.ttl) || 0;
		if (left < Math.max(SOON_MIN_S, ttl * SOON_FRACTION))
			return { key: 'soon', rank: 1, text: 'expiring soon', late: -left };
		return { key: 'held', rank: 0, text: 'held', late: -Infinity };
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

	/* A lock name that breaks only after a '/', unless one segment alone
	 * is too long for its column (then that segment may break anywhere). */
	function nameNode(name, into) {
		const segs = name.split('/');
		segs.forEach((s, i) => {
			const last = i === segs.length - 1;
			into.appendChild(el('span', s + (last ? '' : '/'),
			    s.length > LONG_SEGMENT ? 'seg long' : 'seg'));
			if (!last)
				into.appendChild(document.createElement('wbr'));
		});
		return into;
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

	/* ---------- connection and messages ---------- */

	/* The data on screen is not confirmed by the last poll. */
	function stale() {
		return st.conn !== 'ok' && st.conn !== 'connecting';
	}

	function asOfText() {
		return st.asOf ? 'as of ' + clock(st.asOf) : 'nothing received yet';
	}

	function banner(text, kind, withSignIn) {
		const b = $('banner');
		if (!text) {
			b.hidden = true;
			b.replaceChildren();
			return;
		}
		b.replaceChildren(text);
		if (withSignIn) {
			const btn = el('button', 'Sign in', 'primary');
			btn.type = 'button';
			btn.addEventListener('click', () => askToken(
			    'Paste a new bearer token.'));
			b.append(' ', btn);
		}
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
			return 'Not signed in, or the token was refused: ' + err.message + '.';
		case 403:
			return 'Not allowed: ' + err.message + '.';
		case 0:
			return err.message + '.';
		default:
			return err.message + ' (HTTP ' + err.status + ').';
		}
	}

	/* Banner, live marker and page attribute from st.conn: one place
	 * says how fresh what the page shows is. */
	function showConn() {
		const since = st.downSince ? clock(st.downSince) : '';
		const data = st.loaded ? ' The page shows the last state seen, ' +
		    asOfText() + '; countdowns are stopped.' : '';
		document.body.dataset.stale = stale() && st.loaded ? 'true' : 'false';
		switch (st.conn) {
		case 'ok':
			setLive('live', 'ok');
			if (st.refused && st.whoami && st.whoami.public_read)
				banner('Your token was refused (' + st.refused + '). ' +
				    'Showing what public read allows; sign in again ' +
				    'to act as yourself.', 'info', true);
			else
				banner('');
			break;
		case 'connecting':
			setLive('connecting…', 'wait');
			break;
		case 'down':
			setLive('not answering · ' + asOfText(), 'down');
			banner('lockgate is not answering since ' + since + ' (' +
			    st.connMsg + '); retrying.' + data, 'error');
			break;
		case 'auth':
			setLive(st.loaded ? 'signed out · ' + asOfText() : 'signed out', 'down');
			banner((st.refused ? 'Your token was refused: ' + st.refused +
			    '.' : 'Not signed in, or the token was refused: ' +
			    st.connMsg + '.') + (st.loaded ? data :
			    ' Sign in with a token to see the locks.'), 'error', true);
			break;
		case 'forbidden':
			setLive('forbidden · ' + asOfText(), 'down');
			banner('Not allowed: ' + st.connMsg + '. Your token may not ' +
			    'read these locks.' + data, 'error', true);
			break;
		default:
			setLive('error · ' + asOfText(), 'down');
			banner(st.connMsg + data, 'error');
		}
	}

	/* ---------- data ---------- */

	function prepare(l) {
		l._exp = ms(l.expires_at);
		l._acq = ms(l.acquired_at);
		l._ref = ms(l.refreshed_at);
		l._labels = labelText(l.labels);
		const hay = [l.name, l.owner, l.holder, l.purpose, l._labels,
		    l.fencing_token];
		/* a search finds a semaphore by any of its holders */
		if (isGroup(l))
			for (const h of holdersOf(l))
				hay.push(h.owner, h.holder, h.purpose, h.fencing_token);
		l._hay = hay.map(str).join('\n').toLowerCase();
		return l;
	}

	/* A lock with several leases at once: a semaphore (limit above 1)
	 * or a shared lock.  An exclusive lock shows as it always has. */
	function isGroup(l) {
		return l.mode === 'shared' || (typeof l.limit === 'number' && l.limit > 1);
	}

	function holdersOf(l) {
		return Array.isArray(l.holders) ?
		    l.holders.filter((h) => h && typeof h === 'object') : [];
	}

	/* A group's count against its limit: "2 of 3", or "3 shared". */
	function countText(l) {
		const n = holdersOf(l).length;
		return l.mode === 'shared' ? n + ' shared' : n + ' of ' + l.limit;
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
			return false; /* the filter changed under us: the next poll redoes it */
		if (seen.size !== st.pages.size)
			changed = true;
		st.pages = seen;
		if (!st.loaded) {
			st.loaded = true;
			changed = true;
		}
		if (Number.isFinite(nowMs))
			st.offsetMs = nowMs - Date.now();
		if (changed) {
			/* a lease we saw end (our 204) is not brought back by a
			 * list answer that was on its way before */
			st.locks = out.slice(0, MAX_LOCKS).filter((l) =>
			    !st.forced.has(l.name + '\n' + l.fencing_token)).map(prepare);
			st.byName = new Map(st.locks.map((l) => [l.name, l]));
			st.viewDirty = true;
			st.dataVersion++;
		}
		return changed;
	}

	async function poll() {
		st.timer = null;
		try {
			const changed = await fetchAll();
			const was = st.conn;
			st.failures = 0;
			st.downSince = null;
			st.needToken = false;
			st.conn = 'ok';
			st.connMsg = '';
			st.asOf = new Date();
			showConn();
			render();
			if (st.detail) {
				detailFromList();
				if (changed || was !== 'ok')
					loadDetail(false);
			}
		} catch (err) {
			await failed(err);
		}
		schedule();
	}

	async function failed(err) {
		st.failures++;
		st.connMsg = err.status === 0 ? (/timed out/.test(err.message) ?
		    'timed out' : 'network error') : err.status === 401 ||
		    err.status === 403 ? err.message : explain(err);
		if (!st.downSince)
			st.downSince = new Date();
		if (err.status === 401 && err.sentToken && !st.refused) {
			/* The token expired or was revoked: stop sending it, and
			 * see what may be read without one (public read). */
			st.refused = err.message;
			await loadWhoami(false);
			if (st.whoami && st.whoami.public_read) {
				st.pages = new Map();
				st.failures = 0;
				st.downSince = null;
				showConn();
				showWho();
				return; /* the next poll reads anonymously */
			}
		}
		if (err.status === 0)
			st.conn = 'down';
		else if (err.status === 401)
			st.conn = 'auth';
		else if (err.status === 403)
			st.conn = 'forbidden';
		else
			st.conn = 'error';
		if (err.status === 401 && !st.loaded)
			st.needToken = true;
		showConn();
		render();
		if (st.detail)
			renderDetail(false);
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
		st.byName = new Map();
		st.pages = new Map();
		st.loaded = false;
		st.asOf = null;
		st.viewDirty = true;
		st.dataVersion++;
		render();
	}

	/* ---------- the URL ---------- */

	/* Read the view from location: ?q=&prefix=&state=&sort=&group=&rows=
	 * and #/locks/NAME. */
	function readUrl() {
		const q = new URLSearchParams(location.search);
		st.search = q.get('q') || '';
		st.prefix = (q.get('prefix') || '').trim();
		const sf = q.get('state') || '';
		st.stateFilter = STATES.includes(sf) ? sf : '';
		let sort = q.get('sort') || 'urgency';
		st.sortDir = sort.startsWith('-') ? -1 : 1;
		sort = sort.replace(/^-/, '');
		st.sortKey = SORTS.includes(sort) ? sort : 'urgency';
		const g = Number(q.get('group'));
		st.group = g === 1 || g === 2 ? g : 0;
		const rows = Number(q.get('rows'));
		st.pageSize = [25, 50, 100, 250].includes(rows) ? rows : 50;
		const page = Number(q.get('page'));
		st.page = Number.isInteger(page) && page > 1 ? page - 1 : 0;
		$('search').value = st.search;
		$('prefix').value = st.prefix;
		$('pagesize').value = String(st.pageSize);
		$('group').value = String(st.group);
		syncSortSelect();
		st.viewDirty = true;
		st.pendingDetail = hashLock();
	}

	/* Whether NAME is a lock name the server accepts.  api_name_valid in
	 * api/validate.c is the source of truth; this follows it rule for
	 * rule (the characters are ASCII, so a character is a byte). */
	function nameValid(name) {
		return name.length <= NAME_MAX &&
		    /^[A-Za-z0-9][A-Za-z0-9._\/-]*$/.test(name) &&
		    !name.endsWith('/') && !name.includes('//') &&
		    !name.split('/').some((s) => s === '.' || s === '..');
	}

	/* The lock #/locks/NAME opens, or null.  A valid name needs no
	 * percent-encoding, so it stands in the hash as is; anything else
	 * ('..', %2F, a quote) names no lock and must never reach a URL we
	 * fetch, where '..' would be collapsed onto another path. */
	function hashLock() {
		const m = /^#\/locks\/(.+)$/.exec(location.hash);
		return m && nameValid(m[1]) ? m[1] : null;
	}

	function lockHash(name) {
		return '#/locks/' + name.split('/').map(encodeURIComponent).join('/');
	}

	/* The URL of the view shown now; replaces the history entry (a
	 * keystroke in the search box is no page to go back to). */
	function writeUrl() {
		const q = new URLSearchParams();
		if (st.search.trim())
			q.set('q', st.search.trim());
		if (st.prefix)
			q.set('prefix', st.prefix);
		if (st.stateFilter)
			q.set('state', st.stateFilter);
		if (st.sortKey !== 'urgency' || st.sortDir !== 1)
			q.set('sort', (st.sortDir < 0 ? '-' : '') + st.sortKey);
		if (st.group)
			q.set('group', String(st.group));
		if (st.pageSize !== 50)
			q.set('rows', String(st.pageSize));
		if (st.page > 0)
			q.set('page', String(st.page + 1));
		const qs = q.toString();
		const url = location.pathname + (qs ? '?' + qs : '') +
		    (st.detail ? lockHash(st.detail) : '');
		if (url !== location.pathname + location.search + location.hash)
			history.replaceState(null, '', url);
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
	};

	function cmpTokens(a, b) {
		a = str(a);
		b = str(b);
		return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
	}

	function cmpName(a, b) {
		return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
	}

	function compare(a, b) {
		const key = st.sortKey;
		let r;
		if (key === 'urgency') {
			/* expired first, then overdue by lateness, then what
			 * expires soonest; plain held locks by name */
			r = b._s.rank - a._s.rank;
			if (r === 0 && a._s.late !== b._s.late)
				r = b._s.late > a._s.late ? 1 : -1;
		} else if (key === 'token') {
			r = cmpTokens(a.fencing_token, b.fencing_token);
		} else {
			const f = SORTERS[key], x = f(a), y = f(b);
			if (typeof x === 'number' || typeof y === 'number') {
				const nx = Number.isFinite(x) ? x : -Infinity;
				const ny = Number.isFinite(y) ? y : -Infinity;
				r = nx - ny;
			} else {
				r = x < y ? -1 : x > y ? 1 : 0;
			}
		}
		if (r === 0 && key !== 'name')
			r = cmpName(a, b);
		return r * st.sortDir;
	}

	function groupOf(name) {
		const segs = name.split('/');
		const n = Math.min(st.group, segs.length - 1);
		return n > 0 ? segs.slice(0, n).join('/') + '/' : '';
	}

	/* States (they change with time), counts, the filtered and sorted
	 * view, and its items with group headers. */
	function buildView() {
		const t = now();
		const counts = { '': st.locks.length, held: 0, soon: 0, overdue: 0, expired: 0 };
		for (const l of st.locks) {
			l._s = stateOf(l, t);
			counts[l._s.key]++;
		}
		st.counts = counts;
		const q = st.search.trim().toLowerCase();
		const words = q ? q.split(/\s+/) : [];
		const sf = st.stateFilter;
		const v = words.length || sf ? st.locks.filter((l) =>
		    (!sf || l._s.key === sf) && words.every((w) =>
		    l._hay.includes(w) || l._s.text.includes(w))) : st.locks.slice();
		v.sort(compare);
		st.view = v;
		st.items = v;
		if (st.group) {
			/* groups in the order of their first lock in the sort */
			const groups = new Map();
			for (const l of v) {
				const g = groupOf(l.name);
				if (!groups.has(g))
					groups.set(g, []);
				groups.get(g).push(l);
			}
			const items = [];
			for (const [g, ls] of groups) {
				if (st.collapsed.has(g))
					items.push({ group: g, locks: ls });
				else
					for (const l of ls)
						items.push(l);
			}
			st.groups = groups;
			st.items = items;
		}
		st.viewDirty = false;
	}

	function render() {
		/* states change with time: recount and refilter on every render */
		buildView();
		const pages = Math.max(1, Math.ceil(st.items.length / st.pageSize));
		if (st.page >= pages)
			st.page = pages - 1;
		const start = st.page * st.pageSize;
		const slice = st.items.slice(start, start + st.pageSize);

		/* Rebuild the rows only when what they show changed: a tick
		 * must not take away a selection, a hover or an open text. */
		const key = st.dataVersion + '|' + st.group + '|' + stale() + '|' +
		    slice.map((x) => x.group !== undefined ? '#' + x.group : x.name).join('\n');
		if (key !== st.rowsKey) {
			st.rowsKey = key;
			renderRows(slice);
		} else {
			for (const c of st.rowCells)
				tick1(c);
		}

		const empty = $('empty');
		if (st.view.length === 0) {
			empty.textContent = st.needToken ? 'Sign in to see the locks.' :
			    !st.loaded ? (st.conn !== 'ok' && st.connMsg ?
			    'Could not load the locks (' + st.connMsg + ').' : 'Loading locks…') :
			    st.locks.length === 0 ?
			    (st.prefix ? 'No lock is held under “' + st.prefix + '”.' :
			    'No locks are held right now.') :
			    st.stateFilter && !st.search.trim() ?
			    'No lock is ' + stateText(st.stateFilter) + ' right now.' :
			    'No lock matches “' + st.search.trim() + '”' +
			    (st.stateFilter ? ' among the ' + stateText(st.stateFilter) + ' ones.' : '.');
			empty.hidden = false;
		} else {
			empty.hidden = true;
		}
		const shown = slice.filter((x) => x.group === undefined).length;
		$('summary').textContent = (st.view.length === 0 ? '0 locks' :
		    (start + 1) + '–' + (start + slice.length) + ' of ' +
		    st.view.length + (st.view.length !== st.locks.length ?
		    ' (filtered from ' + st.locks.length + ')' : '') +
		    (st.items.length !== st.view.length ? ' (' + shown +
		    ' shown, groups collapsed)' : '') +
		    (st.locks.length >= MAX_LOCKS ? ' (list cut at ' + MAX_LOCKS + ')' : '')) +
		    (stale() && st.loaded ? ' · ' + asOfText() : '');
		$('prev').disabled = st.page === 0;
		$('next').disabled = st.page >= pages - 1;

		for (const th of document.querySelectorAll('#locks th')) {
			const k = th.dataset.key === 'state' ? 'urgency' : th.dataset.key;
			th.setAttribute('aria-sort', k === st.sortKey ?
			    (st.sortDir > 0 ? 'ascending' : 'descending') : 'none');
		}
		renderCounts();
	}

	function stateText(k) {
		return { held: 'held', soon: 'expiring soon', overdue: 'overdue',
		    expired: 'expired' }[k] || k;
	}

	function renderCounts() {
		for (const b of document.querySelectorAll('#counts button')) {
			const k = b.dataset.state;
			b.querySelector('b').textContent = String(st.counts[k] || 0);
			b.setAttribute('aria-pressed', String(st.stateFilter === k));
			b.dataset.some = st.counts[k] ? 'true' : 'false';
		}
	}

	function renderRows(slice) {
		const active = document.activeElement;
		const refocus = active && active.dataset && (active.dataset.lock ||
		    active.dataset.group);
		const body = $('rows');
		const frag = document.createDocumentFragment();
		st.rowCells = [];
		let prev = null;
		for (const x of slice) {
			if (x.group !== undefined) {
				frag.appendChild(groupRow(x.group, x.locks, false));
				prev = x.group;
				continue;
			}
			const g = st.group ? groupOf(x.name) : null;
			if (st.group && g !== prev) {
				frag.appendChild(groupRow(g, st.groups.get(g), true));
				prev = g;
			}
			frag.appendChild(renderRow(x));
		}
		body.replaceChildren(frag);
		clampCheck(body);
		if (refocus) {
			for (const b of body.querySelectorAll('button[data-lock], button[data-group]'))
				if ((b.dataset.lock || b.dataset.group) === refocus) {
					b.focus();
					break;
				}
		}
	}

	function groupRow(g, locks, open) {
		const tr = el('tr', null, 'group');
		tr.dataset.group = g;
		const th = el('th');
		th.colSpan = 10;
		th.scope = 'rowgroup';
		const b = el('button', null, 'grouptoggle');
		b.type = 'button';
		b.dataset.group = g;
		b.setAttribute('aria-expanded', String(open));
		const n = {};
		for (const l of locks)
			n[l._s.key] = (n[l._s.key] || 0) + 1;
		const parts = [locks.length + (locks.length === 1 ? ' lock' : ' locks')];
		for (const k of ['expired', 'overdue', 'soon'])
			if (n[k])
				parts.push(n[k] + ' ' + stateText(k));
		b.append(el('span', open ? '▾ ' : '▸ ', 'caret'),
		    el('span', g || '(top level)', 'gname'),
		    el('span', ' ' + parts.join(' · '), 'gcount'));
		th.appendChild(b);
		tr.appendChild(th);
		return tr;
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

	/* Long text in span V of a cell: clamped to a few lines, with a
	 * button that shows it whole (clampCheck drops the button when the
	 * text fits after all). */
	function clampable(v, text, id) {
		if (str(text).length <= CLAMP_CHARS)
			return;
		const open = st.expanded.has(id);
		v.classList.add('clamp');
		v.classList.toggle('open', open);
		const b = el('button', open ? 'less' : 'more', 'more');
		b.type = 'button';
		b.dataset.expand = id;
		b.setAttribute('aria-expanded', String(open));
		v.parentNode.appendChild(b);
	}

	function clampCheck(root) {
		for (const v of root.querySelectorAll('.clamp:not(.open)')) {
			if (v.scrollHeight <= v.clientHeight + 1) {
				v.classList.remove('clamp');
				const b = v.parentNode.querySelector('button.more');
				if (b)
					b.remove();
			}
		}
	}

	function renderRow(l) {
		const tr = document.createElement('tr');
		tr.dataset.name = l.name;

		const b = nameNode(l.name, el('button', null, 'linkish'));
		b.type = 'button';
		b.dataset.lock = l.name;
		b.title = 'Details and timeline of ' + l.name;
		td(tr, 'Name', 'name').appendChild(b);
		td(tr, 'Owner', 'owner').textContent = str(l.owner);
		const h = td(tr, 'Holder', 'holder');
		if (isGroup(l)) {
			const c = el('span', countText(l), 'chip holdcount');
			c.title = 'Leases held now, of the most at once; the first ' +
			    'holder follows (all of them in the details)';
			h.append(c, ' ');
		}
		h.appendChild(holderNode(l.holder));
		clampable(h, l.holder, 'h:' + l.name);
		const p = td(tr, 'Purpose', 'purpose');
		p.textContent = str(l.purpose);
		clampable(p, l.purpose, 'p:' + l.name);
		const labels = td(tr, 'Labels', 'labels');
		if (l.labels && typeof l.labels === 'object')
			for (const k of Object.keys(l.labels).sort()) {
				const long = (k + '=' + l.labels[k]).length > LONG_SEGMENT;
				labels.appendChild(pairNode(k, l.labels[k], long ? 'chip long' : 'chip'));
			}
		const acq = td(tr, 'Acquired', 'acquired');
		acq.title = str(l.acquired_at);
		const exp = td(tr, 'Expires in', 'expires');
		const ref = td(tr, 'Last refresh', 'refreshed');
		ref.title = str(l.refreshed_at);
		td(tr, 'Fencing token', 'token').textContent = str(l.fencing_token);
		const stCell = td(tr, 'State', 'state');
		const badge = el('span', '', 'badge');
		const more = el('span', '', 'late');
		stCell.append(badge, more);

		const cells = { lock: l, tr, acquired: acq, expires: exp,
		    refreshed: ref, badge, more };
		st.rowCells.push(cells);
		tick1(cells);
		/* the phone's card leaves out what has nothing to say */
		for (const c of tr.children)
			if (!c.textContent.trim())
				c.dataset.empty = 'true';
		return tr;
	}

	/* The time-dependent cells of one row.  While the page is stale,
	 * the countdown stops at the expiry time last seen and the badge
	 * says what was last seen, not what is. */
	function tick1(c) {
		const l = c.lock, s = l._s || stateOf(l);
		const old = stale() && st.loaded;
		c.acquired.textContent = ago(l._acq);
		c.refreshed.textContent = ago(l._ref);
		c.expires.parentNode.dataset.label = old ? 'Expires' : 'Expires in';
		if (old) {
			c.expires.textContent = Number.isFinite(l._exp) ?
			    'at ' + clock(l._exp - st.offsetMs) : '—';
			c.expires.title = 'the expiry last seen (' + str(l.expires_at) +
			    '); a refresh since then is not known';
			c.badge.textContent = 'last seen ' + s.text;
		} else {
			c.expires.textContent = countdown(l);
			c.expires.title = str(l.expires_at);
			c.badge.textContent = s.text;
		}
		c.more.textContent = s.more ? ' ' + s.more : '';
		c.badge.dataset.state = s.key;
		c.tr.dataset.state = s.key;
	}

	/* Every second: states, counts, countdowns. */
	function tick() {
		if (st.loaded || st.locks.length)
			render();
		if (st.detail)
			renderDetail(false);
	}

	/* ---------- detail ---------- */

	function setDv(dv) {
		st.dv = dv;
		renderDetail(true);
	}

	function openDetail(name) {
		st.detail = name;
		const l = st.byName.get(name);
		st.dv = l && !stale() ? { status: 'held', lock: l, seen: st.asOf } :
		    { status: 'loading', lock: l || null, seen: l ? st.asOf : null };
		$('detailtitle').textContent = name;
		$('detaillink').href = location.pathname + location.search + lockHash(name);
		$('copied').textContent = '';
		$('auditquery').textContent = 'jsonPayload.message="lock event" ' +
		    'AND jsonPayload.lock="' + name + '"';
		detailMsg('');
		$('timeline').replaceChildren();
		renderDetail(true);
		const d = $('detaildlg');
		if (!d.open)
			d.showModal();
		writeUrl();
		$('detaillink').href = location.href;
		loadDetail(true);
	}

	function closeDetail() {
		st.detail = null;
		st.dv = null;
		const d = $('detaildlg');
		if (d.open)
			d.close();
		writeUrl();
	}

	function detailMsg(text, kind) {
		const m = $('detailmsg');
		m.textContent = text;
		m.dataset.kind = kind || 'error';
		m.hidden = !text;
	}

	/* The list can answer for NAME when it covers it: a fresh list of a
	 * prefix NAME is under, not cut short. */
	function listCovers(name) {
		return st.conn === 'ok' && st.loaded && name.startsWith(st.prefix) &&
		    st.locks.length < MAX_LOCKS;
	}

	/* The detail from a fresh list answer. */
	function detailFromList() {
		const name = st.detail;
		if (!name || !st.dv || st.conn !== 'ok')
			return;
		const l = st.byName.get(name);
		if (l)
			setDv({ status: 'held', lock: l, seen: st.asOf });
		else if (listCovers(name) && st.dv.status !== 'gone')
			setDv({ status: 'gone', lock: st.dv.lock, seen: st.dv.seen,
			    checked: new Date(), why: st.dv.why });
		else
			renderDetail(false);
	}

	async function loadDetail(withEvents) {
		const name = st.detail;
		if (!name)
			return;
		try {
			const r = await api('GET', lockPath(name));
			if (st.detail !== name)
				return;
			setDv({ status: 'held', lock: prepare(r.body), seen: new Date() });
		} catch (err) {
			if (st.detail !== name)
				return;
			if (err.status === 404) {
				/* an expired lease not taken over yet is not "held"
				 * to inspect, but the list still shows it */
				const l = st.conn === 'ok' ? st.byName.get(name) : null;
				if (l)
					setDv({ status: 'held', lock: l, seen: st.asOf });
				else if (!st.dv || st.dv.status !== 'gone')
					setDv({ status: 'gone', lock: st.dv ? st.dv.lock : null,
					    seen: st.dv ? st.dv.seen : null, checked: new Date(),
					    why: st.dv ? st.dv.why : '' });
			} else {
				if (err.status === 401 && err.sentToken && !st.refused) {
					await failed(err);
					if (st.whoami && st.whoami.public_read)
						loadDetail(withEvents);
					return;
				}
				setDv({ status: 'unknown', lock: st.dv ? st.dv.lock : null,
				    seen: st.dv ? st.dv.seen : null, err: explain(err) });
			}
		}
		if (withEvents || st.dv.status !== 'unknown')
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
			if (e.reason) {
				const r = el('div', 'reason: ', 'reason');
				r.appendChild(iso(e.reason));
				li.appendChild(r);
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

	/* What the page knows of the detail's lock now: its dv status, or
	 * "unknown" while polls fail (the list is then not confirmed). */
	function detailStatus() {
		const dv = st.dv;
		if (!dv)
			return 'loading';
		if (stale() && dv.status !== 'loading')
			return 'unknown';
		return dv.status;
	}

	function whyUnknown() {
		if (st.conn === 'down')
			return 'lockgate is not answering since ' +
			    (st.downSince ? clock(st.downSince) : '?');
		if (st.conn === 'auth')
			return st.refused ? 'your token was refused (' + st.refused + ')' :
			    'reading needs a token';
		if (st.conn === 'forbidden')
			return 'your token may not read it';
		if (st.conn !== 'ok')
			return st.connMsg;
		return st.dv && st.dv.err ? st.dv.err : 'it could not be read';
	}

	/* The whole detail view from st.dv: note, fields, countdown and
	 * force-release button always agree.  FULL also redraws the button
	 * (not on every tick: its focus would move). */
	function renderDetail(full) {
		if (!st.detail)
			return;
		const dv = st.dv || { status: 'loading' };
		const status = detailStatus();
		const l = dv.lock;
		$('detaildlg').dataset.status = status;
		const note = $('detailnote');
		const seen = dv.seen ? ' What follows is the last state seen, at ' +
		    clock(dv.seen) + '.' : '';
		note.dataset.status = status;
		if (status === 'held') {
			note.hidden = true;
			note.textContent = '';
		} else if (status === 'gone') {
			note.textContent = 'Not held now (checked ' +
			    clock(dv.checked || new Date()) + ').' +
			    (dv.why ? ' ' + dv.why : '') + (l ? seen : '');
			note.hidden = false;
		} else if (status === 'unknown') {
			note.textContent = 'Unknown now: ' + whyUnknown() + '.' +
			    (l ? seen : '');
			note.hidden = false;
		} else {
			note.textContent = 'Loading…';
			note.hidden = false;
		}
		if (l)
			fillFields(l, status);
		else
			$('detailfields').replaceChildren();
		if (full || $('force').disabled !== !forceAllowed(status)) {
			fillForce(status);
			fillHolders(l, status);
		}
	}

	/* A group's holders, one item each (owner, holder, purpose, expiry,
	 * fencing token), each with its own force release: it acts on that
	 * lease only.  Drawn when the Force release button is (not on every
	 * tick: a button's focus would move). */
	function fillHolders(l, status) {
		const box = $('holders');
		box.replaceChildren();
		box.hidden = !l || !isGroup(l);
		if (box.hidden)
			return;
		box.appendChild(el('h3', 'Holders (' + countText(l) + ')'));
		const ol = el('ol', null, 'holderlist');
		for (const h of holdersOf(l)) {
			const li = document.createElement('li');
			li.dataset.token = str(h.fencing_token);
			const dl = el('dl', null, 'fields');
			field(dl, 'Owner', str(h.owner));
			field(dl, 'Holder', holderNode(h.holder));
			field(dl, 'Purpose', str(h.purpose));
			field(dl, 'Expires', str(h.expires_at) + ' (' +
			    clock(new Date(ms(h.expires_at))) + ')');
			field(dl, 'Fencing token', str(h.fencing_token));
			const b = el('button', 'Force release this lease…', 'danger');
			b.type = 'button';
			b.dataset.token = str(h.fencing_token);
			b.disabled = !forceAllowed(status);
			li.append(dl, b);
			ol.appendChild(li);
		}
		box.appendChild(ol);
	}

	function fillFields(l, status) {
		const s = stateOf(l);
		const tmp = document.createElement('div');
		const live = status === 'held';
		let stateText = s.text + (s.more ? ' ' + s.more : '');
		if (status === 'gone')
			stateText = 'not held (was ' + s.text + ' when last seen)';
		else if (status === 'unknown')
			stateText = 'unknown (last seen ' + s.text + ')';
		else if (status === 'loading')
			stateText = 'checking… (listed as ' + s.text + ')';
		field(tmp, 'State', stateText);
		if (isGroup(l))
			field(tmp, 'Holders', countText(l));
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
		field(tmp, 'Expires', str(l.expires_at) +
		    (live ? ' (' + countdown(l) + ')' : ''));
		field(tmp, 'TTL', str(l.ttl) + ' s');
		if (l.expected_duration)
			field(tmp, 'Expected duration', dur(l.expected_duration) +
			    (s.key === 'overdue' ? ' (overdue by ' + durShort(s.late) + ')' : ''));
		const dl = $('detailfields');
		dl.dataset.status = status;
		dl.replaceChildren(...tmp.childNodes);
	}

	function isAdmin() {
		return !!(st.whoami && st.whoami.admin && !st.refused);
	}

	function forceAllowed(status) {
		return status === 'held' && isAdmin();
	}

	function fillForce(status) {
		const box = $('forcebox');
		box.hidden = false;
		$('force').disabled = !forceAllowed(status);
		const l = st.dv && st.dv.lock;
		const group = !!l && isGroup(l);
		$('force').hidden = group;
		const hint = $('forcehint');
		hint.replaceChildren();
		if (group && forceAllowed(status))
			hint.append('Force release acts on one lease: choose it under Holders.');
		else if (status === 'gone')
			hint.append('Nothing to release: the lock is not held.');
		else if (status === 'unknown')
			hint.append('Not while the state is unknown: ' + whyUnknown() + '.');
		else if (status === 'loading')
			hint.append('Checking the lock…');
		else if (!isAdmin() && st.whoami && st.whoami.owner && !st.refused)
			hint.append('Only an admin can force-release a lock; you are ' +
			    'signed in as ', iso(st.whoami.owner), '.');
		else if (!isAdmin())
			hint.append('Only an admin can force-release a lock; sign in ' +
			    'with an admin token.');
		box.dataset.for = st.detail;
	}

	/* TOKEN: the fencing token of a group's lease to release; none: an
	 * exclusive lock's one lease. */
	function confirmForce(token) {
		const l = st.dv && st.dv.lock;
		if (!l || !forceAllowed(detailStatus()))
			return;
		const lease = typeof token === 'string' ?
		    holdersOf(l).find((h) => str(h.fencing_token) === token) : l;
		if (!lease)
			return;
		const text = $('confirmtext');
		text.replaceChildren();
		text.appendChild(document.createTextNode(lease === l ?
		    'Force release ' : 'Force release one lease of '));
		text.appendChild(el('strong', l.name));
		text.appendChild(document.createTextNode(', held by '));
		const holder = el('strong', lease.holder ? null : '(no holder given)');
		if (lease.holder)
			holder.appendChild(iso(lease.holder));
		text.append(holder, ' (owner ', iso(lease.owner), ', fencing token ' +
		    str(lease.fencing_token) + ')? ' +
		    'Its holder loses the lease at once and may still be working.');
		st.forceToken = lease.fencing_token; /* the lease the admin saw */
		st.forceLock = l;
		$('reason').value = '';
		$('reason').setCustomValidity('');
		const d = $('confirmdlg');
		d.returnValue = '';
		d.showModal();
	}

	/* Only the lease shown is removed: if another holds the lock by now,
	 * the server refuses (409) rather than end the new holder's lease. */
	async function doForce(name, token, reason, lock) {
		detailMsg('');
		try {
			const q = new URLSearchParams();
			if (token)
				q.set('fencing_token', token);
			q.set('reason', reason);
			await api('POST', lockPath(name) + ':forceRelease?' + q.toString());
			if (isGroup(lock) && holdersOf(lock).length > 1) {
				/* one lease of several: the lock stays held */
				detailMsg('Force-released the lease with fencing token ' +
				    str(token) + ' of ' + name + '.', 'ok');
				pollNow();
				loadDetail(true);
				return;
			}
			detailMsg('Force-released ' + name + '.', 'ok');
			/* 204: that lease is gone.  The list we hold still has it
			 * until the next poll; it must not bring it back. */
			const gone = name + '\n' + str(lock.fencing_token);
			st.forced.add(gone);
			const before = st.locks.length;
			st.locks = st.locks.filter((x) => x.name + '\n' + x.fencing_token !== gone);
			if (st.locks.length !== before) {
				st.byName = new Map(st.locks.map((x) => [x.name, x]));
				st.dataVersion++;
			}
			st.pages = new Map();
			if (st.detail === name)
				setDv({ status: 'gone', lock, seen: st.dv ? st.dv.seen : null,
				    checked: new Date(), why: 'You force-released it at ' +
				    clock(new Date()) + '.' });
			render();
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
			loadDetail(true);
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

	/* Who we are: with the saved token, or, when the server refuses it,
	 * without one (public read).  ASK: open the sign-in dialog when
	 * nothing can be read, or the token just given was refused. */
	async function loadWhoami(ask) {
		let refusedNow = false;
		for (;;) {
			try {
				const r = await api('GET', '/v1/whoami');
				st.whoami = r.body;
				break;
			} catch (err) {
				st.whoami = null;
				if (err.status === 401 && err.sentToken) {
					st.refused = err.message;
					refusedNow = true;
					continue; /* again without the token */
				}
				if (err.status === 401) {
					st.needToken = !st.loaded;
					if (ask && !$('tokendlg').open)
						askToken(refusedNow ? 'The saved token was refused: ' +
						    err.message : 'This lockgate needs a token to show its locks.');
				}
				break;
			}
		}
		if (refusedNow && st.whoami && ask)
			askToken('That token was refused (' + st.refused + '). ' +
			    'Until you sign in, the page shows what public read allows.');
		showWho();
		if (st.pendingDetail && st.whoami) {
			const name = st.pendingDetail;
			st.pendingDetail = null;
			openDetail(name);
		}
	}

	function showWho() {
		const w = st.whoami, tok = getToken();
		const who = $('who');
		who.replaceChildren();
		if (w && w.owner)
			who.append(iso(w.owner), w.admin ? ' (admin)' : '');
		else if (st.refused)
			who.append('token refused' + (w && w.public_read ? ' · public read' : ''));
		else if (w && w.public_read)
			who.append('public read');
		const signedIn = !!(w && w.owner);
		$('signin').hidden = signedIn;
		/* a refused token is not "signed in": only Sign in is offered */
		$('signout').hidden = !tok || !signedIn;
		if (st.detail)
			renderDetail(true);
	}

	async function signedIn() {
		st.needToken = false;
		st.refused = '';
		st.pages = new Map(); /* other rights may see other locks */
		await loadWhoami(true);
		pollNow();
	}

	/* ---------- wiring ---------- */

	function syncSortSelect() {
		const s = $('sort');
		s.value = st.sortKey;
		if (s.value !== st.sortKey)
			s.value = 'urgency';
	}

	function viewChanged() {
		st.viewDirty = true;
		render();
		writeUrl();
	}

	function wire() {
		$('signin').addEventListener('click', () => askToken(
		    'Paste a bearer token (an admin token can force-release).'));
		$('signout').addEventListener('click', () => {
			setToken('');
			const pub = st.whoami && st.whoami.public_read;
			st.whoami = null;
			if (!pub)
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
				writeUrl();
				pollNow();
			}, PREFIX_DEBOUNCE_MS);
		});
		$('search').addEventListener('input', () => {
			st.search = $('search').value;
			st.page = 0;
			viewChanged();
		});
		$('filters').addEventListener('submit', (ev) => ev.preventDefault());
		$('pagesize').addEventListener('change', () => {
			st.pageSize = Number($('pagesize').value) || 50;
			st.page = 0;
			viewChanged();
		});
		$('sort').addEventListener('change', () => {
			st.sortKey = $('sort').value;
			st.sortDir = 1;
			viewChanged();
		});
		$('group').addEventListener('change', () => {
			st.group = Number($('group').value) || 0;
			st.collapsed.clear();
			st.page = 0;
			viewChanged();
		});
		$('counts').addEventListener('click', (ev) => {
			const b = ev.target.closest('button[data-state]');
			if (!b)
				return;
			const k = b.dataset.state;
			st.stateFilter = st.stateFilter === k ? '' : k;
			st.page = 0;
			viewChanged();
		});
		$('prev').addEventListener('click', () => {
			st.page = Math.max(0, st.page - 1);
			viewChanged();
		});
		$('next').addEventListener('click', () => {
			st.page++;
			viewChanged();
		});
		for (const th of document.querySelectorAll('#locks th')) {
			th.querySelector('button').addEventListener('click', () => {
				const k = th.dataset.key === 'state' ? 'urgency' : th.dataset.key;
				if (st.sortKey === k)
					st.sortDir = -st.sortDir;
				else {
					st.sortKey = k;
					st.sortDir = 1;
				}
				syncSortSelect();
				viewChanged();
			});
		}
		$('rows').addEventListener('click', (ev) => {
			const x = ev.target.closest('button[data-expand]');
			if (x) {
				const id = x.dataset.expand, open = !st.expanded.has(id);
				if (open)
					st.expanded.add(id);
				else
					st.expanded.delete(id);
				x.previousElementSibling.classList.toggle('open', open);
				x.textContent = open ? 'less' : 'more';
				x.setAttribute('aria-expanded', String(open));
				return;
			}
			const g = ev.target.closest('button[data-group]');
			if (g) {
				const name = g.dataset.group;
				if (st.collapsed.has(name))
					st.collapsed.delete(name);
				else
					st.collapsed.add(name);
				viewChanged();
				return;
			}
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
			st.dv = null;
			writeUrl();
		});
		$('copylink').addEventListener('click', async () => {
			const url = $('detaillink').href;
			try {
				await navigator.clipboard.writeText(url);
				$('copied').textContent = 'Copied.';
			} catch (e) {
				$('copied').textContent = 'Copy it from the link (select, then copy).';
			}
		});
		$('force').addEventListener('click', () => confirmForce());
		$('holders').addEventListener('click', (ev) => {
			const b = ev.target.closest('button[data-token]');
			if (b && !b.disabled)
				confirmForce(b.dataset.token);
		});
		$('reason').addEventListener('input', () => {
			const n = new TextEncoder().encode($('reason').value).length;
			$('reason').setCustomValidity(n > REASON_MAX ?
			    'At most ' + REASON_MAX + ' bytes (' + n + ' now).' : '');
		});
		$('confirmdlg').addEventListener('close', () => {
			const d = $('confirmdlg');
			const reason = $('reason').value.trim();
			if (d.returnValue === 'force' && st.detail && reason)
				doForce(st.detail, st.forceToken, reason, st.forceLock);
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
		window.addEventListener('hashchange', () => {
			const name = hashLock();
			if (name && name !== st.detail)
				openDetail(name);
			else if (!name && st.detail)
				closeDetail();
		});
		/* the table's header sticks under the page's sticky top */
		const sticky = $('sticky');
		const setTop = () => document.documentElement.style.setProperty(
		    '--sticky-h', sticky.offsetHeight + 'px');
		if (window.ResizeObserver)
			new ResizeObserver(setTop).observe(sticky);
		setTop();
		setInterval(tick, 1000);
	}

	async function start() {
		wire();
		readUrl();
		render();
		showConn();
		await loadWhoami(true);
		poll();
	}

	if (document.readyState === 'loading')
		document.addEventListener('DOMContentLoaded', start);
	else
		start();
})();
