"""
Try it: one call of a method from its page in the method browser.

The call runs through ``service.answer()``, the path the HTTP endpoint takes,
as the logged-in admin, logged with source ``admin``; it is a CSRF-protected
POST that requires the ``replay_envelope`` permission. The page shows the
request, the answer and the same call as a curl command.
"""

import json
import shlex
from urllib.parse import urlsplit

from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext as _

from .. import protocol
from ..models import Envelope
from .shared import admin_url, pretty, pretty_body


class TryItMixin:
    """The Try-it form of a method page; mixed into a RegistryAdminMixin admin."""

    endpoint_url = None

    def get_endpoint_url(self, request):
        url = self.endpoint_url
        if url is None:
            try:
                url = reverse("jsonrpc_app:endpoint")
            except NoReverseMatch:
                url = "/rpc/"
        return request.build_absolute_uri(url)
    def try_it(self, request, method, form):
        """Run one call of ``method`` from the Try-it form; return what to show, or None."""
        text = form["params"].strip()
        params = None
        if text:
            try:
                params = protocol.loads(text)
            except ValueError as exc:
                form["errors"].append(_("Params are not valid JSON: %(error)s") % {"error": exc})
            else:
                if not isinstance(params, (list, dict)):
                    form["errors"].append(_("Params must be a JSON array or object (or left empty)."))
        id_text = form["id"].strip()
        notification = not id_text
        rid = None
        if not notification:
            try:
                rid = protocol.loads(id_text)
            except ValueError:
                rid = id_text  # a bare word is meant as a string id
            if not (rid is None or isinstance(rid, (str, int, float))) or isinstance(rid, bool):
                form["errors"].append(_("The id must be a string, a number or null."))
        if form["errors"]:
            return None
        body = {"jsonrpc": "2.0", "method": method.name}
        if text:
            body["params"] = params
        if not notification:
            body["id"] = rid
        body_text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        endpoint = self.get_endpoint_url(request)
        answer = self.answer_as_admin(request, body_text, "admin", urlsplit(endpoint).path)
        envelope_url = None
        if answer.envelope is not None:
            envelope_url = admin_url(self.admin_site, Envelope, "change", answer.envelope.pk)
        curl = [
            "curl -s -X POST",
            "-H 'Content-Type: application/json'",
        ]
        if method.requires_authentication:
            # curl asks for the password; the admin's session does not travel to a shell.
            curl.append("-u %s" % shlex.quote(request.user.get_username()))
        curl.append("--data-raw %s" % shlex.quote(body_text))
        curl.append(shlex.quote(endpoint))
        return {
            "request": pretty(body),
            "response": pretty_body(answer.content) if answer.content else "",
            "status": answer.status,
            "ok": isinstance(answer.response, dict) and "result" in answer.response,
            "envelope": answer.envelope,
            "envelope_url": envelope_url,
            "curl": " \\\n  ".join(curl),
        }
