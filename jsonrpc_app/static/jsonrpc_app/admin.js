// jsonrpc_app admin pages: the Copy button and the Format JSON button. No framework.
"use strict";
{
    function copyText(text) {
        if (navigator.clipboard && window.isSecureContext) {
            return navigator.clipboard.writeText(text);
        }
        // Plain-HTTP admins: fall back to a hidden textarea and execCommand.
        const area = document.createElement("textarea");
        area.value = text;
        area.setAttribute("readonly", "");
        area.style.position = "fixed";
        area.style.opacity = "0";
        document.body.appendChild(area);
        area.select();
        try {
            document.execCommand("copy");
        } finally {
            document.body.removeChild(area);
        }
        return Promise.resolve();
    }

    function flash(button, label) {
        const original = button.dataset.label || button.textContent;
        button.dataset.label = original;
        button.textContent = label;
        window.setTimeout(() => { button.textContent = original; }, 1500);
    }

    document.addEventListener("click", (event) => {
        const copy = event.target.closest("[data-copy-target]");
        if (copy) {
            const target = document.getElementById(copy.dataset.copyTarget);
            copyText(target.textContent).then(
                () => flash(copy, "Copied"),
                () => flash(copy, "Copy failed"),
            );
            return;
        }
        const format = event.target.closest("[data-format-target]");
        if (format) {
            const area = document.getElementById(format.dataset.formatTarget);
            if (!area.value.trim()) {
                return;
            }
            try {
                area.value = JSON.stringify(JSON.parse(area.value), null, 2);
                area.setCustomValidity("");
            } catch (error) {
                area.setCustomValidity(String(error.message || error));
                area.reportValidity();
            }
        }
    });

    document.addEventListener("input", (event) => {
        if (event.target.matches("textarea.jsonrpc-code")) {
            event.target.setCustomValidity("");
        }
    });
}
