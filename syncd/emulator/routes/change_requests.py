"""(being written)"""

from aiohttp import web

routes = web.RouteTableDef()
