// A typed use of each operation, as a TypeScript user of the generated types
// would write it; `tsc --noEmit` (make clients) must accept it, and must
// reject each line marked @ts-expect-error, which proves the types are real
// (not `any`). Nothing here runs.
import type { operations } from "../../target/clients/typescript/api";

type Op = keyof operations;
type Body<O extends Op> = operations[O]["requestBody"] extends { content: { "application/json": infer B } } ? B : never;
type Params<O extends Op> = operations[O]["parameters"];
type Answer<O extends Op> = {
  [S in keyof operations[O]["responses"]]: operations[O]["responses"][S] extends {
    content: { "application/json": infer B };
  }
    ? B
    : never;
}[keyof operations[O]["responses"]];
// API Gateway's own 401 and 429 bodies are not the envelope:
// `{message: "Unauthorized"}`, `{message: "Too Many Requests"}`.
type Gateway = { message: "Unauthorized" } | { message: "Too Many Requests" };
type Reply<O extends Op> = Exclude<Answer<O>, Gateway>;

// Every answer is either one of API Gateway's own or the envelope.
export function describe(answer: Answer<"updateModel">): string {
  if (!("error" in answer)) return `${answer.message === "Unauthorized" ? 401 : 429} ${answer.message}`;
  return answer.error ? `${answer.status} ${answer.errorDetails.code}` : `${answer.status} ${answer.message}`;
}

const projectId = "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d";

export const keyParams: Params<"updateApiKey"> = { path: { id: "3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b01" } };
export const key: Body<"updateApiKey"> = { name: "Production OpenAI key", api_key: "sk-new", enabled: false };
// @ts-expect-error read-only fields are not part of an update
export const keyWithId: Body<"updateApiKey"> = { id: "3f1c2a9e-7b4d-4e8a-9c21-5d6e7f8a9b01" };

export const serverParams: Params<"updateMcpServer"> = {
  path: { id: "5b6c7d8e-9f01-4a2b-8c3d-4e5f6a7b8c9d" },
  query: { project_id: projectId },
  header: { "If-Match": '"1"' },
};
export const server: Body<"updateMcpServer"> = {
  endpoint: "https://mcp.example.com/v2/sse",
  headers: { Authorization: "Bearer rotated-token" },
};
// @ts-expect-error header values are strings
export const serverWithNumber: Body<"updateMcpServer"> = { headers: { "X-Retries": 3 } };

export const modelParams: Params<"updateModel"> = {
  path: { id: "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f" },
  query: { project_id: projectId },
};
export const model: Body<"updateModel"> = {
  provider_type: "Anthropic",
  parameters: { temperature: 0.2, max_tokens: 8192, stop: ["\n\n", null], reasoning: { effort: "high" } },
};
// @ts-expect-error provider_type is one of four spellings
export const modelWithBadProvider: Body<"updateModel"> = { provider_type: "openai" };
// @ts-expect-error a scoped route needs project_id
export const modelWithoutProject: Params<"updateModel"> = { path: { id: "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f" } };

// The envelope is a union discriminated by `error`: a success has the
// record, an error has its machine code.
export function keyOutcome(reply: Reply<"updateApiKey">): string {
  if (reply.error) return `${reply.status} ${reply.errorDetails.code}`;
  // @ts-expect-error the secret is never in a response
  const secret: unknown = reply.data.api_key;
  return `${reply.message}: ${reply.data.name ?? ""} enabled=${String(reply.data.enabled)} ${String(secret)}`;
}

export function serverOutcome(reply: Reply<"updateMcpServer">): string {
  if (reply.error) return `${reply.status} ${reply.errorDetails.code}`;
  const headers: Record<string, string> = reply.data.headers ?? {};
  return `${reply.data.endpoint ?? ""} ${Object.keys(headers).join(",")}`;
}

export function modelOutcome(reply: Reply<"updateModel">): string {
  if (reply.error) {
    const fields = "fields" in reply.errorDetails ? (reply.errorDetails.fields ?? []) : [];
    return `${reply.status} ${reply.errorDetails.code} ${fields.map((f) => `${f.field}:${f.code}`).join(" ")}`;
  }
  const status: 200 = reply.status;
  return `${status} ${reply.data.provider_type ?? ""} ${JSON.stringify(reply.data.parameters)}`;
}
