"""Airflow's `EmailOperator`: sends an e-mail through an SMTP server, as Airflow's `send_email_smtp`.

The server is Airflow's `[smtp]` configuration, read from its environment variables
(`AIRFLOW__SMTP__SMTP_HOST`, `_PORT`, `_STARTTLS`, `_SSL`, `_MAIL_FROM`, `_TIMEOUT`), with Airflow's
defaults (localhost:25, STARTTLS); the login is the `conn_id` Connection's (`smtp_default`) when one
can be read. No server reachable fails the try, as in Airflow.
"""

from __future__ import annotations

import smtplib
import ssl
from collections.abc import Sequence
from email.mime.application import MIMEApplication
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from email.utils import formatdate
from pathlib import Path
from typing import Any

from zonda.authoring.configuration import conf
from zonda.context import Context
from zonda.operators.base import BaseOperator


def _addresses(value: list[str] | str | None) -> list[str]:
    if not value:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.replace(";", ",").split(",") if part.strip()]
    return list(value)


class EmailOperator(BaseOperator):
    """Send an e-mail with an HTML body (and `files` attached).

    :param to: recipients, a list or a comma/semicolon-separated string. (templated)
    :param subject: the subject. (templated)
    :param html_content: the HTML body. (templated)
    :param files: paths of files to attach. (templated)
    :param conn_id: the SMTP Connection whose login is used (Airflow's `smtp_default`).
    """

    template_fields: Sequence[str] = ("to", "from_email", "subject", "html_content", "files", "cc", "bcc")

    def __init__(
        self,
        *,
        to: list[str] | str,
        subject: str,
        html_content: str,
        files: list[str] | None = None,
        cc: list[str] | str | None = None,
        bcc: list[str] | str | None = None,
        mime_subtype: str = "mixed",
        mime_charset: str = "utf-8",
        conn_id: str | None = None,
        custom_headers: dict[str, Any] | None = None,
        from_email: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.to = to
        self.subject = subject
        self.html_content = html_content
        self.files = files or []
        self.cc = cc
        self.bcc = bcc
        self.mime_subtype = mime_subtype
        self.mime_charset = mime_charset
        self.conn_id = conn_id or "smtp_default"
        self.custom_headers = custom_headers or {}
        self.from_email = from_email

    def execute(self, context: Context) -> None:
        mail_from = self.from_email or conf.get("smtp", "smtp_mail_from", fallback="airflow@example.com")
        message = MIMEMultipart(self.mime_subtype)
        message["Subject"] = self.subject
        message["From"] = mail_from
        message["To"] = ", ".join(_addresses(self.to))
        if self.cc:
            message["CC"] = ", ".join(_addresses(self.cc))
        message["Date"] = formatdate(localtime=True)
        for name, value in self.custom_headers.items():
            message[name] = value
        message.attach(MIMEText(self.html_content, "html", self.mime_charset))
        for file in self.files:
            path = Path(file)
            part = MIMEApplication(path.read_bytes(), Name=path.name)
            part["Content-Disposition"] = f'attachment; filename="{path.name}"'
            message.attach(part)
        recipients = _addresses(self.to) + _addresses(self.cc) + _addresses(self.bcc)
        self._send(mail_from, recipients, message.as_string())

    def _send(self, mail_from: str, recipients: list[str], text: str) -> None:
        host = conf.get("smtp", "smtp_host", fallback="localhost")
        port = int(conf.get("smtp", "smtp_port", fallback="25"))
        timeout = float(conf.get("smtp", "smtp_timeout", fallback="30"))
        use_ssl = conf.getboolean("smtp", "smtp_ssl", fallback=False)
        starttls = conf.getboolean("smtp", "smtp_starttls", fallback=True)
        login = self._login()
        self.log.info("Sending an e-mail to %s through %s:%s", recipients, host, port)
        server: smtplib.SMTP
        if use_ssl:
            server = smtplib.SMTP_SSL(host, port, timeout=timeout, context=ssl.create_default_context())
        else:
            server = smtplib.SMTP(host, port, timeout=timeout)
        with server:
            if starttls and not use_ssl:
                server.starttls(context=ssl.create_default_context())
            if login is not None:
                server.login(*login)
            server.sendmail(mail_from, recipients, text)

    def _login(self) -> tuple[str, str] | None:
        try:
            from zonda.variables import get_connection

            connection = get_connection(self.conn_id)
        except Exception:  # no such Connection (or none readable here): send without a login
            return None
        if connection.login and connection.password:
            return str(connection.login), str(connection.password)
        return None
