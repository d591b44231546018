"""
The call log: one ``Envelope`` row per body received (a single request or a
batch), one ``Call`` row per element inside it. Written only by
``jsonrpc_app.log``; routed to ``JSONRPC["LOG_DATABASE"]`` by
``jsonrpc_app.routers.LogRouter``.

The user foreign keys carry no database constraint and do nothing when the
user is deleted: the log may live in another database than the users (see
LOG_DATABASE), and an audit trail keeps who called even after the account is
gone (``username`` is a snapshot taken when the call was logged).

Every index is paid for on every logged row, so only the list's date order,
the method and an envelope's calls have full indexes; the filters that pick
rare rows (errors, error codes, users, sources other than HTTP, replays) have
partial indexes that the common row, an OK call over HTTP, does not touch.
A partial index serves a query only when the query's WHERE states its
condition, which is why the admin's filters add ``NOT_HTTP`` and
``ENVELOPE_HAS_ERRORS`` (below) to what they filter on.
"""

import os
import random
import time
import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class Source(models.TextChoices):
    HTTP = "http", _("HTTP")
    ADMIN = "admin", _("Admin try-it")
    REPLAY = "replay", _("Replay")
    CLI = "cli", _("Command line")


class Outcome(models.TextChoices):
    OK = "ok", _("OK")
    ERROR = "error", _("Error")


# The conditions of the partial indexes. A query uses one only when its WHERE
# holds the condition itself (SQLite matches terms literally; an ``x = value``
# term also stands for ``x IS NOT NULL``), so the admin filters on rare sources
# and on failed envelopes add these Q objects to their own terms.
NOT_HTTP = ~Q(source=Source.HTTP)
ENVELOPE_HAS_ERRORS = Q(error_count__gt=0) | Q(error_code__isnull=False)


class LogJSONField(models.JSONField):
    """
    A JSONField without SQLite's ``CHECK (JSON_VALID(col) OR col IS NULL)``.

    That constraint parses every value again on insert; the log's JSON is
    written only by jsonrpc_app.log, which serialised it itself, so the check
    buys nothing. On PostgreSQL (jsonb) and elsewhere nothing changes.
    """

    def db_check(self, connection):
        return None


# The random bits of uuid7(): a generator seeded from os.urandom() once per
# process (and again in a forked child, which must not repeat its parent's),
# where os.urandom() per id was a system call on every logged envelope (~7 µs
# here). The uid only has to be unique, not unguessable.
_random = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _random.seed(os.urandom(32)))


def uuid7():
    """
    Return a UUID of version 7 (RFC 9562): 48 bits of Unix time in
    milliseconds, then 74 random bits. Envelope ids made one after another
    sort one after another, so each new one lands on the last page of the
    unique index instead of a random page (uuid4), which the index would
    have to read and split as it grows.
    """
    value = (time.time_ns() // 1_000_000) << 80 | _random.getrandbits(80)
    value = (value & _VERSION_AND_VARIANT_MASK) | _VERSION_7_VARIANT_RFC
    # What uuid.UUID(int=value) does, without its argument checks (the value
    # is in range by construction): a fifth of its cost, on every envelope.
    made = _new_uuid(uuid.UUID)
    _set(made, "int", value)
    _set(made, "is_safe", uuid.SafeUUID.unknown)
    return made


_VERSION_AND_VARIANT_MASK = ~(0xF << 76) & ~(0x3 << 62)
_VERSION_7_VARIANT_RFC = (0x7 << 76) | (0x2 << 62)  # version 7, RFC 9562 variant
_new_uuid = object.__new__
_set = object.__setattr__


def _user_fk():
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        models.DO_NOTHING,
        null=True,
        blank=True,
        db_constraint=False,
        # Covered by the partial (user, -created_at) index: most rows have no user.
        db_index=False,
        related_name="+",
        verbose_name=_("user"),
    )


class Envelope(models.Model):
    """One body received by an endpoint: a single request or a batch."""

    # Unique across databases and retries: lets a spooled envelope be written exactly once.
    uid = models.UUIDField(_("unique id"), default=uuid7, unique=True, editable=False)
    created_at = models.DateTimeField(_("received at"), default=timezone.now, editable=False)
    endpoint = models.CharField(_("endpoint"), max_length=255, blank=True)
    source = models.CharField(_("source"), max_length=16, choices=Source.choices, default=Source.HTTP)
    is_batch = models.BooleanField(_("batch"), default=False)
    # As received (redacted and size-capped by jsonrpc_app.log).
    request_body = models.TextField(_("request body"), blank=True)
    response_body = models.TextField(_("response body"), blank=True)
    http_status = models.PositiveSmallIntegerField(_("HTTP status"), default=200)
    duration_ms = models.FloatField(_("duration (ms)"), default=0.0)
    user = _user_fk()
    username = models.CharField(_("username"), max_length=150, blank=True)
    remote_addr = models.GenericIPAddressField(_("remote address"), null=True, blank=True)
    user_agent = models.CharField(_("user agent"), max_length=512, blank=True)
    replay_of = models.ForeignKey(
        "self",
        models.SET_NULL,
        null=True,
        blank=True,
        related_name="replays",
        verbose_name=_("replay of"),
        # Indexed only where set (see Meta.indexes): most envelopes are no replay.
        db_index=False,
        # No database constraint (migration 0009): its per-row trigger was most of
        # a prune's time on PostgreSQL; the ORM still unlinks replays (SET_NULL).
        db_constraint=False,
    )
    # Set when the body as a whole was answered by one error (parse error,
    # empty batch, body too large, authentication failed...).
    error_code = models.IntegerField(_("envelope error code"), null=True, blank=True)
    error_message = models.TextField(_("envelope error message"), blank=True)
    # The methods called, in order, each once ("subtract, echo"), for the list.
    methods = models.CharField(_("methods"), max_length=255, blank=True)
    call_count = models.PositiveIntegerField(_("calls"), default=0)
    error_count = models.PositiveIntegerField(_("errors"), default=0)

    class Meta:
        verbose_name = _("envelope")
        verbose_name_plural = _("envelopes")
        ordering = ["-created_at", "-id"]
        permissions = [("replay_envelope", _("Can replay envelopes and try methods"))]
        # Indexes run in ascending time, read backwards for the lists' newest
        # first: a new row then lands on the rightmost page of each index,
        # which SQLite and PostgreSQL fill without splitting it in half
        # (descending indexes took ~27% more pages and ~7% more time to write).
        indexes = [
            # Full: the list's order, and the prune command's cut-off.
            models.Index(fields=["created_at", "id"], name="jsonrpc_env_created"),
            # Partial: only the rows a filter picks out of many.
            models.Index(fields=["source", "created_at"], name="jsonrpc_env_source_rare", condition=NOT_HTTP),
            models.Index(
                fields=["user", "created_at"], name="jsonrpc_env_user_set", condition=Q(user__isnull=False)
            ),
            models.Index(fields=["created_at"], name="jsonrpc_env_failed", condition=ENVELOPE_HAS_ERRORS),
            # The bodies rejected whole (one in thousands): the outcome "invalid" and
            # the error code filters (error_code = N implies the condition).
            models.Index(
                fields=["error_code", "created_at"], name="jsonrpc_env_rejected", condition=Q(error_code__isnull=False)
            ),
            models.Index(
                fields=["replay_of"], name="jsonrpc_env_replay_of", condition=Q(replay_of__isnull=False)
            ),
        ]

    def __str__(self):
        kind = _("batch") if self.is_batch else _("request")
        return "%s #%s" % (kind, self.pk)

    @property
    def outcome(self):
        """"ok", or "error" when the envelope or any of its calls failed."""
        if self.error_code is not None or self.error_count:
            return Outcome.ERROR
        return Outcome.OK


class Call(models.Model):
    """One element of an envelope: a call, a notification or an invalid request."""

    # No database constraint (migration 0009): an envelope and its calls are
    # written in one transaction and deleted together (CASCADE by the ORM, or
    # jsonrpc_prune's ranges); the constraint's trigger only slowed the prune.
    envelope = models.ForeignKey(
        Envelope, models.CASCADE, related_name="calls", verbose_name=_("envelope"), db_constraint=False
    )
    position = models.PositiveIntegerField(_("position"), default=0)
    created_at = models.DateTimeField(_("received at"), default=timezone.now, editable=False)
    method = models.CharField(_("method"), max_length=255, blank=True)
    # The id exactly as sent, JSON type kept ("1" and 1 differ); SQL NULL for
    # notifications and for an explicit null id (is_notification tells them apart).
    request_id = LogJSONField(_("request id"), null=True, blank=True)
    is_notification = models.BooleanField(_("notification"), default=False)
    # For an invalid request object: the whole element as sent.
    params = LogJSONField(_("params"), null=True, blank=True)
    result = LogJSONField(_("result"), null=True, blank=True)
    outcome = models.CharField(_("outcome"), max_length=8, choices=Outcome.choices, default=Outcome.OK)
    error_code = models.IntegerField(_("error code"), null=True, blank=True)
    error_message = models.TextField(_("error message"), blank=True)
    error_data = LogJSONField(_("error data"), null=True, blank=True)
    # Internal errors only; shown to staff in the admin, never to clients.
    traceback = models.TextField(_("traceback"), blank=True)
    duration_ms = models.FloatField(_("duration (ms)"), default=0.0)
    # Copied from the envelope so that the usual filters need no join.
    user = _user_fk()
    username = models.CharField(_("username"), max_length=150, blank=True)
    source = models.CharField(_("source"), max_length=16, choices=Source.choices, default=Source.HTTP)

    class Meta:
        verbose_name = _("call")
        verbose_name_plural = _("calls")
        ordering = ["-created_at", "-id"]
        indexes = [
            # Full: the list's order, the method (list filter, method browser);
            # and the envelope foreign key's own index (an envelope's calls, prune).
            models.Index(fields=["created_at", "id"], name="jsonrpc_call_created"),
            models.Index(fields=["method", "created_at"], name="jsonrpc_call_method"),
            # Partial: an OK call over HTTP by anyone touches none of these.
            models.Index(fields=["created_at"], name="jsonrpc_call_failed", condition=Q(outcome=Outcome.ERROR)),
            models.Index(
                fields=["error_code", "created_at"],
                name="jsonrpc_call_error_code_set",
                condition=Q(error_code__isnull=False),
            ),
            models.Index(
                fields=["user", "created_at"], name="jsonrpc_call_user_set", condition=Q(user__isnull=False)
            ),
            models.Index(fields=["source", "created_at"], name="jsonrpc_call_source_rare", condition=NOT_HTTP),
        ]

    def __str__(self):
        return "%s [%s]" % (self.method or _("(invalid request)"), self.outcome)


class MethodEntry(Envelope):
    """
    The admin's method browser: no rows of its own; the proxy gives the browser
    its place on the admin index, next to the call log, and its view permission.
    """

    class Meta:
        proxy = True
        verbose_name = _("method")
        verbose_name_plural = _("methods")
        default_permissions = ("view",)


# The duration histogram of UsageRollup: the upper bound in milliseconds of
# each bucket h00..h15 (a call of d ms goes in the first bucket whose bound is
# >= d); h16 holds what is slower than the last bound. Fixed, so that rows of
# any age add up; roughly 1-2.5-5 per decade from 0.1 ms to 10 s.
HISTOGRAM_BOUNDS_MS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
HISTOGRAM_FIELDS = tuple("h%02d" % i for i in range(len(HISTOGRAM_BOUNDS_MS) + 1))


class Width(models.IntegerChoices):
    """The span of a UsageRollup row, in seconds; 0: all time (one row per key)."""

    MINUTE = 60, _("minute")
    HOUR = 3600, _("hour")
    TOTAL = 0, _("all time")


class UsageRollup(models.Model):
    """
    The usage of one method in one time bucket, from one source, with one
    outcome: how many calls, their durations (sum, min, max and a fixed
    histogram for percentiles), maintained by jsonrpc_app.log.rollup in the
    transaction that writes the calls. The usage pages read these rows, never
    Call; they are not deleted with pruned calls.

    An OK call counts under ``is_error=False, error_code=0``, an error under
    ``is_error=True`` and its code, so that errors by code need no table of
    their own and every write is one upsert per key.
    """

    width = models.PositiveIntegerField(_("width (seconds)"), choices=Width.choices)
    # The bucket's first instant (UTC); 1970-01-01 for the all-time rows.
    start = models.DateTimeField(_("start"))
    method = models.CharField(_("method"), max_length=255, blank=True)
    source = models.CharField(_("source"), max_length=16, choices=Source.choices, default=Source.HTTP)
    is_error = models.BooleanField(_("error"), default=False)
    error_code = models.IntegerField(_("error code"), default=0)
    calls = models.BigIntegerField(_("calls"), default=0)
    notifications = models.BigIntegerField(_("notifications"), default=0)
    duration_sum = models.FloatField(_("duration sum (ms)"), default=0.0)
    duration_min = models.FloatField(_("shortest (ms)"), default=0.0)
    duration_max = models.FloatField(_("longest (ms)"), default=0.0)
    h00 = models.BigIntegerField(default=0)
    h01 = models.BigIntegerField(default=0)
    h02 = models.BigIntegerField(default=0)
    h03 = models.BigIntegerField(default=0)
    h04 = models.BigIntegerField(default=0)
    h05 = models.BigIntegerField(default=0)
    h06 = models.BigIntegerField(default=0)
    h07 = models.BigIntegerField(default=0)
    h08 = models.BigIntegerField(default=0)
    h09 = models.BigIntegerField(default=0)
    h10 = models.BigIntegerField(default=0)
    h11 = models.BigIntegerField(default=0)
    h12 = models.BigIntegerField(default=0)
    h13 = models.BigIntegerField(default=0)
    h14 = models.BigIntegerField(default=0)
    h15 = models.BigIntegerField(default=0)
    h16 = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = _("usage")
        verbose_name_plural = _("usage")
        # The key of the upsert; its (width, start) prefix serves the
        # dashboard's time ranges, and (width=0, start=epoch, method) a method's totals.
        constraints = [
            models.UniqueConstraint(
                fields=["width", "start", "method", "source", "is_error", "error_code"],
                name="jsonrpc_usage_key",
            )
        ]
        indexes = [
            # One method over a time range (the dashboard for a method).
            models.Index(fields=["method", "width", "start"], name="jsonrpc_usage_method"),
        ]

    def __str__(self):
        return "%s %s %s" % (self.method, self.get_width_display(), self.start)
