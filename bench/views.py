"""
The floor: a bare Django view that parses the body, calls the function and
answers with JSON. No JSON-RPC app can do less, so it is what the others are
measured against. ``bare_orjson`` is the same with orjson.
"""

import json

import orjson
from django.http import HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from .methods import describe, subtract

FUNCS = {"subtract": subtract, "describe": describe}


def _answer(call):
    params = call["params"]
    func = FUNCS[call["method"]]
    result = func(*params) if type(params) is list else func(**params)
    return {"jsonrpc": "2.0", "result": result, "id": call["id"]}


@csrf_exempt
def bare(request):
    data = json.loads(request.body)
    if type(data) is list:
        return JsonResponse([_answer(call) for call in data], safe=False)
    return JsonResponse(_answer(data))


@csrf_exempt
def bare_orjson(request):
    data = orjson.loads(request.body)
    if type(data) is list:
        data = [_answer(call) for call in data]
    else:
        data = _answer(data)
    return HttpResponse(orjson.dumps(data), content_type="application/json")


@csrf_exempt
async def bare_async(request):
    """The floor under ASGI: ``bare`` as an async view (the sync tables' "× bare" is over it too)."""
    data = json.loads(request.body)
    if type(data) is list:
        return JsonResponse([_answer(call) for call in data], safe=False)
    return JsonResponse(_answer(data))
