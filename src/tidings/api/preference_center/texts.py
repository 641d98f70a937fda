"""The preference center's words, per language, and the language a page is shown in: the
user's own locale, else the browser's Accept-Language, else English."""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT = "en"

EN: Mapping[str, str] = {
    "title": "Your notification preferences",
    "intro": "Choose what reaches you, and where. Changes apply to messages already on their way.",
    "category": "Messages",
    "transactional": "Account and orders",
    "transactional.about": "Receipts, security codes, changes to your account.",
    "reminder": "Reminders",
    "reminder.about": "Things you asked to be reminded of.",
    "marketing": "News and offers",
    "marketing.about": "Announcements, promotions and newsletters.",
    "email": "Email",
    "sms": "SMS",
    "push": "Push",
    "webhook": "Webhook",
    "inbox": "In-app",
    "slack": "Slack",
    "discord": "Discord",
    "teams": "Teams",
    "telegram": "Telegram",
    "whatsapp": "WhatsApp",
    "switch": "{category} by {channel}",
    "locked": "Always on",
    "locked.transactional": "Always on: messages about your account must reach you.",
    "locked.other": "Always on: the sender needs this channel for these messages.",
    "quiet": "Quiet hours",
    "quiet.about": "Push and SMS wait until they end; leave both empty for none.",
    "quiet.from": "From",
    "quiet.to": "To",
    "timezone": "Time zone",
    "locale": "Language",
    "unset": "Not set",
    "save": "Save preferences",
    "saved": "Your preferences are saved.",
    "error": "Nothing was saved:",
    "error.quiet": "give both times of the quiet hours, different from each other, or neither.",
    "error.timezone": "choose a time zone from the list.",
    "error.locale": "choose a language from the list.",
    "error.form": "this form could not be read; reload the page and try again.",
    "invalid.title": "Link not valid",
    "invalid.text": "This preferences link is not valid or was altered.",
    "expired.title": "Link expired",
    "expired.text": "This preferences link has expired: use the link in a newer message.",
    "missing.title": "No preferences here",
    "missing.text": "There are no preferences for this link any more.",
    "forbidden.title": "Form expired",
    "forbidden.text": "This form is too old or did not come from this page. Nothing was saved.",
    "reload": "Open the page again",
}

PT_BR: Mapping[str, str] = {
    "title": "Suas preferências de notificação",
    "intro": "Escolha o que chega até você, e por onde. As mudanças valem também para as "
    "mensagens já a caminho.",
    "category": "Mensagens",
    "transactional": "Conta e pedidos",
    "transactional.about": "Recibos, códigos de segurança, mudanças na sua conta.",
    "reminder": "Lembretes",
    "reminder.about": "Coisas que você pediu para lembrar.",
    "marketing": "Novidades e ofertas",
    "marketing.about": "Anúncios, promoções e newsletters.",
    "email": "E-mail",
    "sms": "SMS",
    "push": "Push",
    "webhook": "Webhook",
    "inbox": "No app",
    "slack": "Slack",
    "discord": "Discord",
    "teams": "Teams",
    "telegram": "Telegram",
    "whatsapp": "WhatsApp",
    "switch": "{category} por {channel}",
    "locked": "Sempre ativo",
    "locked.transactional": "Sempre ativo: mensagens sobre a sua conta precisam chegar até você.",
    "locked.other": "Sempre ativo: o remetente precisa deste canal para estas mensagens.",
    "quiet": "Horário de silêncio",
    "quiet.about": "Push e SMS esperam até ele acabar; deixe os dois vazios para nenhum.",
    "quiet.from": "De",
    "quiet.to": "Até",
    "timezone": "Fuso horário",
    "locale": "Idioma",
    "unset": "Não definido",
    "save": "Salvar preferências",
    "saved": "Suas preferências foram salvas.",
    "error": "Nada foi salvo:",
    "error.quiet": "informe os dois horários do silêncio, diferentes entre si, ou nenhum.",
    "error.timezone": "escolha um fuso horário da lista.",
    "error.locale": "escolha um idioma da lista.",
    "error.form": "não foi possível ler este formulário; recarregue a página e tente de novo.",
    "invalid.title": "Link inválido",
    "invalid.text": "Este link de preferências não é válido ou foi alterado.",
    "expired.title": "Link expirado",
    "expired.text": "Este link de preferências expirou: use o link de uma mensagem mais recente.",
    "missing.title": "Sem preferências aqui",
    "missing.text": "Não há mais preferências para este link.",
    "forbidden.title": "Formulário expirado",
    "forbidden.text": "Este formulário é antigo demais ou não veio desta página. Nada foi salvo.",
    "reload": "Abrir a página de novo",
}

ES: Mapping[str, str] = {
    "title": "Tus preferencias de notificación",
    "intro": "Elige qué te llega y por dónde. Los cambios se aplican también a los mensajes "
    "ya en camino.",
    "category": "Mensajes",
    "transactional": "Cuenta y pedidos",
    "transactional.about": "Recibos, códigos de seguridad, cambios en tu cuenta.",
    "reminder": "Recordatorios",
    "reminder.about": "Cosas que pediste que te recordáramos.",
    "marketing": "Novedades y ofertas",
    "marketing.about": "Anuncios, promociones y boletines.",
    "email": "Correo",
    "sms": "SMS",
    "push": "Push",
    "webhook": "Webhook",
    "inbox": "En la app",
    "slack": "Slack",
    "discord": "Discord",
    "teams": "Teams",
    "telegram": "Telegram",
    "whatsapp": "WhatsApp",
    "switch": "{category} por {channel}",
    "locked": "Siempre activo",
    "locked.transactional": "Siempre activo: los mensajes sobre tu cuenta deben llegarte.",
    "locked.other": "Siempre activo: el remitente necesita este canal para estos mensajes.",
    "quiet": "Horas de silencio",
    "quiet.about": "Push y SMS esperan a que terminen; deja ambas vacías para ninguna.",
    "quiet.from": "Desde",
    "quiet.to": "Hasta",
    "timezone": "Zona horaria",
    "locale": "Idioma",
    "unset": "Sin definir",
    "save": "Guardar preferencias",
    "saved": "Tus preferencias se guardaron.",
    "error": "No se guardó nada:",
    "error.quiet": "indica las dos horas del silencio, distintas entre sí, o ninguna.",
    "error.timezone": "elige una zona horaria de la lista.",
    "error.locale": "elige un idioma de la lista.",
    "error.form": "no se pudo leer este formulario; recarga la página e inténtalo de nuevo.",
    "invalid.title": "Enlace no válido",
    "invalid.text": "Este enlace de preferencias no es válido o fue alterado.",
    "expired.title": "Enlace caducado",
    "expired.text": "Este enlace de preferencias caducó: usa el enlace de un mensaje más reciente.",
    "missing.title": "Sin preferencias aquí",
    "missing.text": "Ya no hay preferencias para este enlace.",
    "forbidden.title": "Formulario caducado",
    "forbidden.text": "Este formulario es demasiado antiguo o no vino de esta página. "
    "No se guardó nada.",
    "reload": "Abrir la página de nuevo",
}

# Each language's words, and its name in itself (the language list of the form).
TEXTS: Mapping[str, Mapping[str, str]] = {"en": EN, "pt-BR": PT_BR, "es": ES}
NAMES: Mapping[str, str] = {"en": "English", "pt-BR": "Português (Brasil)", "es": "Español"}
# An Accept-Language header longer than this is read only this far.
MAX_HEADER_CHARS = 1000


def supported(locale: str | None) -> str | None:
    """The page language for ``locale``: the same tag (``pt-br``, ``pt_BR``), else one of its
    language (``pt-PT`` -> ``pt-BR``, ``es-MX`` -> ``es``); None when there is none."""
    if not locale:
        return None
    tag = locale.strip().replace("_", "-").lower()
    for known in TEXTS:
        if known.lower() == tag:
            return known
    language = tag.split("-")[0]
    for known in TEXTS:
        if known.lower().split("-")[0] == language:
            return known
    return None


def accepted(header: str | None) -> list[str]:
    """The languages of an Accept-Language header, most wanted first (RFC 9110, 12.5.4);
    those with q=0 are left out."""
    ranked: list[tuple[float, int, str]] = []
    for index, part in enumerate((header or "")[:MAX_HEADER_CHARS].split(",")):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        name, _, value = params.strip().partition("=")
        if name.strip().lower() == "q":
            try:
                quality = float(value)
            except ValueError:
                continue
        if tag and tag != "*" and quality > 0:
            ranked.append((-quality, index, tag))
    return [tag for _, _, tag in sorted(ranked)]


def language(user_locale: str | None, accept_language: str | None) -> str:
    """The user's locale if the page speaks it, else the browser's first it speaks, else en."""
    for wanted in [user_locale, *accepted(accept_language)]:
        found = supported(wanted)
        if found is not None:
            return found
    return DEFAULT
