/* What a command reports: errors, notes and text (--json or not), and the
 * output of a sub-command (swap, storm). The lowest layer: calls nothing
 * of hpslot's. */
#include "hpslot.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static void add_msg(struct hp_out *o, const char *key, const char *msg)
{
	struct json_object *arr;
	if (!json_object_object_get_ex(o->root, key, &arr)) {
		arr = json_object_new_array();
		json_object_object_add(o->root, key, arr);
	}
	json_object_array_add(arr, json_object_new_string(msg));
}

void hp_fail(struct hp_out *o, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!json_object_object_get_ex(o->root, "error", NULL))
		json_object_object_add(o->root, "error", json_object_new_string(msg));
	else
		add_msg(o, "errors", msg);
	fprintf(stderr, "hpslot: %s\n", msg);
}

void hp_note(struct hp_out *o, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	add_msg(o, "notes", msg);
	if (!o->a->json)
		printf("note: %s\n", msg);
}

void hp_say(struct hp_out *o, const char *fmt, ...)
{
	va_list ap;
	if (o->a->json)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

/* ---- sub-commands (swap, storm) ---------------------------------------- */

void hp_out_init(struct hp_out *o, struct hp_args *a)
{
	memset(o, 0, sizeof(*o));
	o->a = a;
	o->root = json_object_new_object();
	o->slots = json_object_new_array();
	json_object_object_add(o->root, "slots", json_object_get(o->slots));
}

void hp_out_free(struct hp_out *o)
{
	json_object_put(o->slots);
	json_object_put(o->root);
	o->slots = o->root = NULL;
}
