// A typed use of the generated types, as a TypeScript user would write it: `tsc --noEmit` (make clients)
// must accept it and reject each line marked @ts-expect-error, which proves the types are real (not `any`).
import type { operations } from "../../target/clients/typescript/api";

type Op = keyof operations;
type Json<T> = T extends { content: { "application/json": infer B } } ? B : never;
type Body<O extends Op> = Json<operations[O]["requestBody"]>;
type Params<O extends Op> = operations[O]["parameters"];
// Every answer but API Gateway's own 401 and 429 (`{message}`) is the envelope, discriminated by `error`.
type Reply<O extends Op> = Exclude<
  { [S in keyof operations[O]["responses"]]: Json<operations[O]["responses"][S]> }[keyof operations[O]["responses"]],
  { message: "Unauthorized" } | { message: "Too Many Requests" }
>;
const [projectId, modelId] = ["8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d", "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f"];

export const keyParams: Params<"updateApiKey"> = { path: { id: "3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b01" } };
export const key: Body<"updateApiKey"> = { name: "Production OpenAI key", api_key: "sk-new", enabled: false };
// @ts-expect-error read-only fields are not part of an update
export const keyWithId: Body<"updateApiKey"> = { id: "3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b01" };
export const serverParams: Params<"updateMcpServer"> = {
  path: { id: "5b6c7d8e-9f01-4a2b-8c3d-4e5f6a7b8c9d" }, query: { project_id: projectId }, header: { "If-Match": '"1"' },
};
export const server: Body<"updateMcpServer"> = { endpoint: "https://mcp.example.com/sse", headers: { "X-Team": "a" } };
// @ts-expect-error header values are strings
export const serverWithNumber: Body<"updateMcpServer"> = { headers: { "X-Retries": 3 } };
export const model: Body<"updateModel"> = {
  provider_type: "Anthropic", parameters: { temperature: 0.2, stop: ["\n\n", null], reasoning: { effort: "high" } },
};
// @ts-expect-error provider_type is one of four spellings
export const modelWithBadProvider: Body<"updateModel"> = { provider_type: "openai" };
export const modelParams: Params<"updateModel"> = { path: { id: modelId }, query: { project_id: projectId } };
// @ts-expect-error a scoped route needs project_id
export const modelWithoutProject: Params<"updateModel"> = { path: { id: modelId } };

export function keyOutcome(reply: Reply<"updateApiKey">): string {
  if (reply.error) return `${reply.status} ${reply.errorDetails.code}`;
  // @ts-expect-error the secret is never in a response
  const secret: unknown = reply.data.api_key;
  return `${reply.data.name ?? ""} enabled=${String(reply.data.enabled)} ${String(secret)}`;
}
export function serverOutcome(reply: Reply<"updateMcpServer">): string {
  const headers: Record<string, string> = reply.error ? {} : (reply.data.headers ?? {});
  return `${reply.status} ${Object.keys(headers).join(",")}`;
}
export function modelOutcome(reply: Reply<"updateModel">): string {
  if (reply.error) {
    const fields = "fields" in reply.errorDetails ? (reply.errorDetails.fields ?? []) : [];
    return `${reply.status} ${reply.errorDetails.code} ${fields.map((f) => `${f.field}:${f.code}`).join(" ")}`;
  }
  return `${reply.status satisfies 200} ${reply.data.provider_type ?? ""} ${JSON.stringify(reply.data.parameters)}`;
}
