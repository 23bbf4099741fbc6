/* Command-line values: checked numbers, lists and paths. Every parser
 * prints what is wrong (naming the option and what it takes) and returns
 * -1; the command then exits 2 before it does anything. */
#include "labprobe.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *labprobe_cmd = "";

void arg_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "labprobe %s: ", labprobe_cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static const struct option *opt_by_val(const struct option *opts, int val)
{
	for (; opts->name; opts++)
		if (opts->val == val)
			return opts;
	return NULL;
}

/* getopt_long also takes an unambiguous abbreviation (--slot for
 * --slots): refused, so that a typo never passes as another option. el is
 * the argument that named o: "--NAME" or "--NAME=VALUE". */
static bool spelled_out(const char *el, const struct option *o)
{
	size_t len = strcspn(el, "=");

	return o && len == strlen(o->name) + 2 && !strncmp(el, "--", 2) && !strncmp(el + 2, o->name, len - 2);
}

static int unknown_opt(const char *el, const struct option *o)
{
	if (o)
		arg_error("unknown option '%.*s' (did you mean --%s?)", (int)strcspn(el, "="), el, o->name);
	else
		arg_error("unknown option '%.*s'", (int)strcspn(el, "="), el);
	return '?';
}

int next_opt(int argc, char **argv, const struct option *opts, bool positional)
{
	const struct option *o;
	const char *el;
	int c, idx = -1;

	/* "-": an argument that is no option comes back in its place (as 1),
	 * so every command reads its arguments in order, as it always did;
	 * ":": a missing value is told apart from an unknown option */
	opterr = 0;
	c = getopt_long(argc, argv, "-:", opts, &idx);
	switch (c) {
	case -1:
		/* "--" ends the options: nothing may follow it */
		if (optind < argc) {
			arg_error("unexpected argument '%s' after --", argv[optind]);
			return '?';
		}
		return -1;
	case 1:
		if (positional)
			return 1;
		arg_error("unexpected argument '%s'", optarg);
		return '?';
	case ':':
		/* a long option last, without its value (optopt: its val) */
		el = argv[optind - 1];
		o = opt_by_val(opts, optopt);
		if (!spelled_out(el, o))
			return unknown_opt(el, o);
		arg_error("%s needs a value", el);
		return '?';
	case '?':
		/* optopt: 0 for an unknown long option, its val for one given
		 * a value it does not take, the letter of an unknown -X */
		if (optopt && optopt < OPT_FIRST) {
			arg_error("unknown option '-%c'", optopt);
			return '?';
		}
		el = argv[optind - 1];
		o = opt_by_val(opts, optopt);
		if (!optopt || !spelled_out(el, o))
			return unknown_opt(el, optopt ? o : NULL);
		arg_error("--%s takes no value, got '%s'", o->name, el);
		return '?';
	}
	/* the option's own argument: before its value when that came apart */
	o = &opts[idx];
	el = optarg && optarg == argv[optind - 1] ? argv[optind - 2] : argv[optind - 1];
	if (!spelled_out(el, o))
		return unknown_opt(el, o);
	return c;
}

/* strtol/strtod skip leading blanks and accept an empty string as 0 */
static bool number_shaped(const char *s)
{
	return s && s[0] && !strchr(" \t\n\v\f\r", s[0]);
}

int parse_long_opt(const char *opt, const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = number_shaped(s) ? strtol(s, &end, 10) : 0;
	if (!number_shaped(s) || *end) {
		arg_error("%s takes an integer from %ld to %ld, got '%s'", opt, min, max, s ? s : "");
		return -1;
	}
	if (errno == ERANGE || v < min || v > max) {
		arg_error("%s is out of range: '%s' (allowed: %ld to %ld)", opt, s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

bool scan_long(const char *s, char **end, long min, long max, long *out)
{
	char *e;
	long v;

	if (!number_shaped(s))
		return false;
	errno = 0;
	v = strtol(s, &e, 10);
	if (e == s || errno == ERANGE || v < min || v > max || (!end && *e))
		return false;
	if (end)
		*end = e;
	*out = v;
	return true;
}

int parse_int_opt(const char *opt, const char *s, int min, int max, int *out)
{
	long v;

	if (parse_long_opt(opt, s, min, max, &v))
		return -1;
	*out = (int)v;
	return 0;
}

int parse_double_opt(const char *opt, const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = number_shaped(s) ? strtod(s, &end) : 0;
	if (!number_shaped(s) || *end || isnan(v)) {
		arg_error("%s takes a number from %g to %g, got '%s'", opt, min, max, s ? s : "");
		return -1;
	}
	/* ERANGE: 1e999 (inf) or an underflow, neither meant */
	if (errno == ERANGE || !isfinite(v) || v < min || v > max) {
		arg_error("%s is out of range: '%s' (allowed: %g to %g)", opt, s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

/* Splits "a,b,c" in place (empty entries are skipped); refuses more than
 * max entries rather than dropping the rest. */
int parse_list(const char *opt, char *arg, char **items, int max)
{
	int n = 0;

	for (char *t = strtok(arg, ","); t; t = strtok(NULL, ",")) {
		if (n == max) {
			arg_error("%s lists more than %d entries", opt, max);
			return -1;
		}
		items[n++] = t;
	}
	return n;
}

/* A slot is a physical slot number (/sys/bus/pci/slots/<n>, 13 bits in
 * Slot Capabilities); it goes into sysfs paths, so nothing else passes. */
int check_slot(const char *opt, const char *slot)
{
	long v;

	return parse_long_opt(opt, slot, 0, 8191, &v);
}

int parse_slots(const char *opt, char *arg, char **items, int max)
{
	int n = parse_list(opt, arg, items, max);

	for (int i = 0; i < n; i++)
		if (check_slot(opt, items[i]))
			return -1;
	return n;
}

/* SLOT=VALUE entries: the slot checked, '=' split off into *value ("" if
 * there is none and value_optional, else an error). */
int parse_slot_values(const char *opt, char *arg, char **items, const char **values, int max,
		      bool value_optional)
{
	int n = parse_list(opt, arg, items, max);

	for (int i = 0; i < n; i++) {
		char *eq = strchr(items[i], '=');

		if (!eq && !value_optional) {
			arg_error("%s takes SLOT=VALUE entries, got '%s'", opt, items[i]);
			return -1;
		}
		if (eq)
			*eq = '\0';
		values[i] = eq ? eq + 1 : "";
		if (check_slot(opt, items[i]))
			return -1;
	}
	return n;
}

/* Paths from the command line reach open(), mkdir() and unlink(): only an
 * absolute path of plain characters, no "..", short enough that the file
 * names built under it fit their buffers. */
int check_path_opt(const char *opt, const char *s)
{
	size_t len = strlen(s);

	if (s[0] != '/') {
		arg_error("%s must be an absolute path (starting with /), got '%s'", opt, s);
		return -1;
	}
	if (len > DIR_ARG_MAX) {
		arg_error("%s is longer than %d characters", opt, DIR_ARG_MAX);
		return -1;
	}
	if (strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._+-") != len) {
		arg_error("%s may hold only letters, digits and / . _ + -, got '%s'", opt, s);
		return -1;
	}
	if (strstr(s, "..")) {
		arg_error("%s must not contain '..', got '%s'", opt, s);
		return -1;
	}
	return 0;
}
