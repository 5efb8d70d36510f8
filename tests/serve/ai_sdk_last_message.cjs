// A chat whose client keeps no history on the wire: the `ai` package's transport (ai@6)
// with `prepareSendMessagesRequest` sending the last message only, as the AI SDK's
// persistence guide does (`{message, id}`), or as a one-element `messages` list.
// usage: node ai_sdk_last_message.cjs BASE_URL AGENT CHAT_ID SHAPE   (SHAPE: message | messages)
const ai = require("ai");

const [base, agent, chatId, shape] = process.argv.slice(2);
const transport = new ai.DefaultChatTransport({
  api: `${base}/v1/agents/${agent}/chat`,
  prepareSendMessagesRequest({ messages, id }) {
    const last = messages[messages.length - 1];
    return { body: shape === "message" ? { message: last, id } : { messages: [last], id } };
  },
});

function fail(message, detail) {
  console.error(`ai-sdk-last-message: ${message}` + (detail === undefined ? "" : `\n${JSON.stringify(detail, null, 2)}`));
  process.exit(1);
}

async function turn(messages) {
  const stream = await transport.sendMessages({
    chatId,
    messages,
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
  });
  let last;
  for await (const snapshot of ai.readUIMessageStream({ stream, terminateOnError: true })) last = snapshot;
  return structuredClone(last);
}

const text = (id, words) => ({ id, role: "user", parts: [{ type: "text", text: words }] });

(async () => {
  const messages = [text("u1", "My name is Ada.")];
  messages.push(await turn(messages));
  messages.push(text("u2", "What is my name?"));
  messages.push(await turn(messages));
  const valid = await ai.safeValidateUIMessages({ messages });
  if (!valid.success) fail(`the chat's messages do not validate: ${valid.error}`, messages);
  console.log(JSON.stringify({ messages }));
})().catch((err) => fail(err && err.stack ? err.stack : String(err)));
