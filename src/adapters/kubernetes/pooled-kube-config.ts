/**
 * A KubeConfig whose API calls share one connection pool. @kubernetes/client-node 2.x gives every
 * call of a generated API client (`applySecurityAuthentication`) a new undici Agent, so every call
 * opens a new TCP connection and, over HTTPS, runs a new TLS handshake; only its Watch and WebSocket
 * paths cache their agent. A process that polls the API (the node operator every few seconds, the
 * join service on every join) then pays a handshake per request on both ends.
 *
 * Here the first Agent made for a cluster, user and TLS material is kept and handed to every later
 * call; the Agents made for those calls are closed unused (they hold no socket). When the TLS
 * material changes (a rotated client certificate or CA file), the new Agent replaces the kept one,
 * which closes once its requests in flight have finished.
 */
import { createHash } from 'node:crypto';
import { bufferFromFileOrString, KubeConfig } from '@kubernetes/client-node';

type SecurityContext = Parameters<KubeConfig['applySecurityAuthentication']>[0];
type Dispatcher = NonNullable<ReturnType<SecurityContext['getDispatcher']>>;

/** See the module comment. */
export class PooledKubeConfig extends KubeConfig {
  #pool: { key: string; dispatcher: Dispatcher } | undefined;

  override async applySecurityAuthentication(context: SecurityContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const made = context.getDispatcher();
    if (made === undefined) return;
    const key = this.#connectionKey();
    const pool = this.#pool;
    if (pool?.key === key) {
      context.setDispatcher(pool.dispatcher);
      void made.close().catch(() => {});
      return;
    }
    this.#pool = { key, dispatcher: made };
    void pool?.dispatcher.close().catch(() => {});
  }

  /** What a connection depends on: the endpoint, the user and the TLS material (files read now). */
  #connectionKey(): string {
    const cluster = this.getCurrentCluster();
    const user = this.getCurrentUser();
    const digest = (file?: string, data?: string) => {
      const bytes = bufferFromFileOrString(file, data);
      return bytes === null ? null : createHash('sha256').update(bytes).digest('hex');
    };
    return JSON.stringify([
      cluster?.name,
      cluster?.server,
      cluster?.skipTLSVerify,
      cluster?.tlsServerName,
      cluster?.proxyUrl,
      digest(cluster?.caFile, cluster?.caData),
      user?.name,
      digest(user?.certFile, user?.certData),
      digest(user?.keyFile, user?.keyData),
    ]);
  }
}
