/*
 * format_env.h: JSON answers as shell assignments, for `Accept: text/plain`
 * or `format=env` (issue 7).  A shell script without jq does
 *
 *     eval "$(curl -H 'Accept: text/plain' ...)"
 *
 * and has LOCKGATE_LEASE_ID, LOCKGATE_FENCING_TOKEN, ... set.  Only the
 * body changes: the HTTP status and headers stay those of the JSON answer.
 *
 * The output is a sequence of lines KEY='value'\n where
 *   - KEY is LOCKGATE_ followed by [A-Z0-9_] only (member names upper-cased,
 *     every other byte turned into '_', at most SRV_ENV_KEY_MAX bytes);
 *   - value is the member's bytes between single quotes, each embedded
 *     single quote written as '\'' .  Inside single quotes a shell expands
 *     nothing ($, `, \ and newlines are literal), so no value can end the
 *     assignment early or run a command, and evaluating the line gives back
 *     the value byte for byte.  A NUL byte (which no shell variable can
 *     hold) is dropped.
 * Strings are written as they are, integers in decimal, reals with %.17g,
 * true/false as true/false, null as an empty value, nested objects and
 * arrays as compact JSON text.
 *
 * Mapping of answers (design section 2):
 *   lock or lease  {name, owner, holder, ..., lease_id, refresh_interval}
 *                  -> LOCKGATE_LOCK (from name), LOCKGATE_OWNER,
 *                     LOCKGATE_HOLDER, LOCKGATE_LEASE_ID, ..., and
 *                     LOCKGATE_STATE: the object's own "state" member,
 *                     else 'held' (or 'expired' when it says "expired":
 *                     true) when it has a fencing_token.  Its holders
 *                     (an array: every lease of a semaphore or shared
 *                     lock, the one lease of an exclusive lock) as
 *                     LOCKGATE_HOLDERS, their number, and holder I's
 *                     members as LOCKGATE_HOLDER_<I>_OWNER,
 *                     LOCKGATE_HOLDER_<I>_FENCING_TOKEN, ... (I from 0);
 *                     in a list, LOCKGATE_<J>_HOLDERS and so on.
 *   error          {"error": {code, message, ...}}
 *                  -> LOCKGATE_ERROR (code), LOCKGATE_ERROR_MESSAGE, other
 *                     scalar members as LOCKGATE_ERROR_<MEMBER>; a member
 *                     that is an object (the current holder of a 409
 *                     locked) is written as a lock (LOCKGATE_HOLDER, ...)
 *                     but for its token, LOCKGATE_HOLDER_FENCING_TOKEN
 *                     (never LOCKGATE_FENCING_TOKEN: not the caller's);
 *                     LOCKGATE_STATE from that holder, else 'free' for
 *                     not_held and 'held' for locked; and last the line
 *                     SRV_ENV_ERROR_END, so that eval of an error fails.
 *   list           {locks: [...], next_page_token}
 *                  -> LOCKGATE_COUNT, then lock I as LOCKGATE_<I>_LOCK,
 *                     LOCKGATE_<I>_HOLDER, ... (I from 0), and
 *                     LOCKGATE_NEXT_PAGE_TOKEN.
 *   anything else that is not an object -> LOCKGATE_VALUE (compact JSON).
 */
#ifndef LOCKGATE_FORMAT_ENV_H
#define LOCKGATE_FORMAT_ENV_H

#include <jansson.h>

#define SRV_ENV_PREFIX    "LOCKGATE_"
#define SRV_ENV_KEY_MAX   96        /* bytes of a key, prefix included */
#define SRV_ENV_ERROR_END "false\n" /* the last line of an error */

/* ANSWER (borrowed; NULL allowed, giving "") as KEY='value' lines, see
 * above.  Returns a new NUL-terminated string the caller frees with
 * free(), or NULL when out of memory. */
char *srv_env_format(const json_t *answer);

#endif
