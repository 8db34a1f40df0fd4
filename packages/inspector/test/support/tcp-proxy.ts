import net from "node:net";

/**
 * A loopback TCP proxy standing for the network between the browser and the server: `cut()` drops
 * every open connection and refuses new ones until `restore()`.
 */
export class TcpProxy {
  private readonly sockets = new Set<net.Socket>();
  private down = false;
  /** Connections refused while cut: a client trying to reconnect shows here. */
  refused = 0;
  private readonly server: net.Server;

  private constructor(targetPort: number) {
    this.server = net.createServer((client) => {
      if (this.down) {
        this.refused++;
        return void client.destroy();
      }
      const upstream = net.connect(targetPort, "127.0.0.1");
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on("close", () => this.sockets.delete(socket));
        socket.on("error", () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
    });
  }

  static async start(targetPort: number): Promise<TcpProxy> {
    const proxy = new TcpProxy(targetPort);
    await new Promise<void>((resolve) => proxy.server.listen(0, "127.0.0.1", resolve));
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  /** Drops every connection (both directions) and refuses new ones. */
  cut(): number {
    this.down = true;
    const count = this.sockets.size;
    for (const socket of this.sockets) socket.destroy();
    return count;
  }

  restore(): void {
    this.down = false;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
