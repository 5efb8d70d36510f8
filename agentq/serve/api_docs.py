"""`/docs`: the OpenAPI document in Swagger UI, every asset served from the wheel.

FastAPI's own `/docs` loads Swagger UI's script, stylesheet and favicon from a CDN, so it
is blank on a machine without internet access; these are the files of the npm package
`swagger-ui-dist` (Apache-2.0, its LICENSE and NOTICE beside them), copied unchanged into
`static/swagger-ui/`. To update them: `npm pack swagger-ui-dist@VERSION`, copy the same
files over and set `SWAGGER_UI_VERSION`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

SWAGGER_UI_VERSION = "5.35.0"
ASSETS = "/static/swagger-ui"

router = APIRouter(include_in_schema=False)


@router.get("/docs", response_class=HTMLResponse)
async def swagger_ui(request: Request) -> HTMLResponse:
    # Behind a proxy that mounts the app under a prefix, as FastAPI's own /docs does.
    root = str(request.scope.get("root_path", "")).rstrip("/")
    assets = f"{root}{ASSETS}"
    return get_swagger_ui_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} - API",
        # The version in the URL: a browser's cached copy is not reused after an update.
        swagger_js_url=f"{assets}/swagger-ui-bundle.js?v={SWAGGER_UI_VERSION}",
        swagger_css_url=f"{assets}/swagger-ui.css?v={SWAGGER_UI_VERSION}",
        swagger_favicon_url=f"{assets}/favicon-32x32.png",
    )
