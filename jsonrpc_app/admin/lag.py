"""What the admin's log pages say about the call log's journal: how far its loader is behind."""

from django.contrib import messages
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from .. import log
from ..conf import jsonrpc_settings

# A loader that runs is at most a few of its intervals behind; past this many
# seconds the lag is a warning, not a note.
BEHIND_SECONDS = 30.0


def _age(seconds):
    if seconds < 120:
        return _("%.1f s") % seconds
    if seconds < 7200:
        return _("%d min") % (seconds // 60)
    return _("%.1f h") % (seconds / 3600)


def journal_messages(request):
    """Add the loader's lag (lines, age of the oldest unloaded envelope) and rejected lines as messages."""
    if jsonrpc_settings.LOG_WRITER != "journal":
        return
    try:
        lag = log.lag()
    except Exception as exc:  # the journal's directory cannot be read
        messages.error(request, _("The call log journal cannot be read: %s") % exc)
        return
    if lag.error is not None:
        messages.error(request, _("The call log journal (%(where)s) cannot be read: %(error)s")
                       % {"where": lag.where, "error": lag.error})
    if lag.lines:
        text = ngettext(
            "%(approx)s%(count)d envelope waits in the call log journal (%(where)s) and is not listed "
            "here yet; the oldest was received %(age)s ago.",
            "%(approx)s%(count)d envelopes wait in the call log journal (%(where)s) and are not listed "
            "here yet; the oldest was received %(age)s ago.",
            lag.lines,
        ) % {
            "approx": _("About ") if lag.approximate else "",
            "count": lag.lines,
            "where": lag.where,
            "age": _age(lag.oldest_age) if lag.oldest_age is not None else "?",
        }
        if lag.oldest_age is not None and lag.oldest_age > BEHIND_SECONDS:
            messages.warning(
                request,
                text + " " + _("Is the loader running (LOG_LOADER %(mode)s), and can it write to the database?")
                % {"mode": jsonrpc_settings.LOG_LOADER},
            )
        else:
            messages.info(request, text)
    if lag.rejected:
        messages.error(
            request,
            ngettext(
                "%(count)d journal line was refused by the database; it is kept in %(where)s (*.rejected).",
                "%(count)d journal lines were refused by the database; they are kept in %(where)s (*.rejected).",
                lag.rejected,
            ) % {"count": lag.rejected, "where": lag.where},
        )
