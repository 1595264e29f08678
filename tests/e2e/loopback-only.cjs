// Preload for servers that listen on all interfaces by default (server-everything): forces
// listen() calls without a host onto 127.0.0.1, so test servers stay on loopback.
const net = require('net');
const orig = net.Server.prototype.listen;
net.Server.prototype.listen = function (...a) {
  if (typeof a[0] === 'number' || (typeof a[0] === 'string' && /^\d+$/.test(a[0])))
    return orig.call(this, { port: Number(a[0]), host: '127.0.0.1' }, a.find((x) => typeof x === 'function'));
  if (a[0] && typeof a[0] === 'object' && a[0].port !== undefined) a[0] = { ...a[0], host: '127.0.0.1' };
  return orig.apply(this, a);
};
