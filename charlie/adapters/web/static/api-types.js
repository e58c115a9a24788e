// The API's shapes, generated from its OpenAPI schema: do not edit by hand.
//   ./scripts/api-types
// Use one in a script: /** @type {import('./api-types.js').MemoryFile} */
export {};


/**
 * @typedef {Object} BuiltinModel
 * @property {string} name
 * @property {string} path
 * @property {number} size
 * @property {"setting"|"chosen"|"starter"} source
 * @property {string|null} speed
 */

/**
 * @typedef {Object} ChatRequest
 * @property {string} text
 * @property {Array<string>} [images]
 */

/**
 * @typedef {Object} Created
 * @property {number} id
 */

/**
 * @typedef {Object} Credentials
 * @property {string} name
 * @property {string} password
 */

/**
 * @typedef {Object} DecisionOut
 * @property {string} text
 * @property {string} since
 * @property {string} by
 * @property {Array<number>} sources
 * @property {string} flag
 */

/**
 * @typedef {Object} DiscordCode
 * @property {string} code
 * @property {string} expires_at
 * @property {number} linked
 */

/**
 * @typedef {Object} Doctor
 * @property {string} server
 * @property {string} source
 * @property {string} model
 * @property {boolean} ok
 * @property {boolean} slow
 * @property {string} verdict
 * @property {Array<DoctorCheck>} checks
 */

/**
 * @typedef {Object} DoctorCheck
 * @property {string} check
 * @property {string} status
 * @property {string} result
 * @property {string} fix
 * @property {boolean} essential
 */

/**
 * @typedef {Object} EarlierOut
 * @property {string} text
 * @property {string} since
 * @property {string} by
 * @property {Array<number>} sources
 * @property {string} until
 * @property {number|null} changed_by
 */

/**
 * @typedef {Object} Edit
 * @property {string} text
 */

/**
 * @typedef {Object} Ended
 * @property {number} ended_sessions
 */

/**
 * @typedef {Object} ForgetBody
 * @property {boolean} [only]
 */

/**
 * @typedef {Object} Forgotten
 * @property {number} messages
 * @property {number} quotes
 * @property {number} revisions
 * @property {Array<string>} flagged
 * @property {number} restated
 */

/**
 * @typedef {Object} GuardStep
 * @property {"guard"} type
 * @property {"max_iterations"|"ignored_calls"|"bad_arguments"|"duplicate_call"|"unknown_tool"|"write_not_allowed"|"write_refused"|"timeout"|"unreadable_call"|"not_an_answer"} guard
 * @property {string} detail
 */

/**
 * @typedef {Object} HTTPValidationError
 * @property {Array<ValidationError>} [detail]
 */

/**
 * @typedef {Object} Health
 * @property {string} version
 * @property {LlmHealth} llm
 * @property {IndexHealth} index
 * @property {HistoryIndexing|null} history
 */

/**
 * @typedef {Object} Heard
 * @property {string} text
 * @property {string|null} language
 * @property {number} seconds
 * @property {number} audio_seconds
 * @property {number} speech_seconds
 * @property {number} vad_seconds
 */

/**
 * How far the messages the caller may read are indexed for recall by meaning.
 * @typedef {Object} HistoryIndexing
 * @property {number} total
 * @property {number} indexed
 * @property {boolean} done
 * @property {boolean} running
 * @property {number|null} seconds_left
 * @property {string} line
 */

/**
 * @typedef {Object} Household
 * @property {boolean} has_people
 */

/**
 * @typedef {Object} IndexHealth
 * @property {number} notes
 * @property {number} chunks
 * @property {number} problems
 * @property {string|null} model
 * @property {"ready"|"not built"|"building"|"rebuilding"|"damaged"|"unavailable"} state
 * @property {string|null} rebuilt
 * @property {string|null} incomplete
 * @property {string|null} [error]
 */

/**
 * @typedef {Object} LlmHealth
 * @property {string} base_url
 * @property {string|null} model
 * @property {boolean} reachable
 * @property {Array<string|null>|null} [models]
 * @property {string|null} error
 */

/**
 * @typedef {Object} LoadStep
 * @property {"load"} type
 * @property {string} category
 * @property {boolean} ok
 * @property {Array<string>} tools
 * @property {number} ms
 */

/**
 * @typedef {Object} Me
 * @property {string} name
 * @property {boolean} is_admin
 */

/**
 * @typedef {Object} MemoryBody
 * @property {string} summary
 * @property {Array<string>} decisions
 * @property {Array<Object<string, string>>} quotes
 */

/**
 * @typedef {Object} MemoryFile
 * @property {string} summary
 * @property {string} summary_html
 * @property {Array<DecisionOut>} decisions
 * @property {Array<QuoteOut>} quotes
 * @property {Array<EarlierOut>} superseded
 * @property {string|null} markdown
 * @property {string|null} error
 */

/**
 * @typedef {Object} MemoryOut
 * @property {string} summary
 * @property {string} summary_html
 * @property {Array<DecisionOut>} decisions
 * @property {Array<QuoteOut>} quotes
 * @property {Array<EarlierOut>} superseded
 */

/**
 * @typedef {Object} MemoryStartedOver
 * @property {string} summary
 * @property {string} summary_html
 * @property {Array<DecisionOut>} decisions
 * @property {Array<QuoteOut>} quotes
 * @property {Array<EarlierOut>} superseded
 * @property {number} revision_id
 * @property {number} retired
 * @property {string} message
 */

/**
 * @typedef {Object} MemoryUndone
 * @property {string} summary
 * @property {string} summary_html
 * @property {Array<DecisionOut>} decisions
 * @property {Array<QuoteOut>} quotes
 * @property {Array<EarlierOut>} superseded
 * @property {number} revision_id
 */

/**
 * @typedef {Object} MessageOut
 * @property {number} id
 * @property {"user"|"assistant"} role
 * @property {string} speaker
 * @property {string} content
 * @property {string|null} html
 * @property {string} created_at
 * @property {Array<SuggestedStep|LoadStep|ToolCallStep|ModeStep|GuardStep>|null} trace
 * @property {number} thread
 * @property {Array<number>|null} [alternatives]
 */

/**
 * @typedef {Object} ModeStep
 * @property {"mode"} type
 * @property {"native"|"text"|"constrained"} mode
 * @property {string} reason
 */

/**
 * @typedef {Object} ModelChoice
 * @property {string} [model]
 */

/**
 * The starter model's install in the background, as the app polls it.
 * @typedef {Object} ModelInstall
 * @property {"idle"|"downloading"|"checking"|"done"|"failed"|"cancelled"} state
 * @property {number} part
 * @property {number} parts
 * @property {number} bytes
 * @property {number} total
 * @property {string} line
 * @property {string|null} error
 */

/**
 * The built-in model: the one Charlie would run when no model server answers.
 * @typedef {Object} ModelStatus
 * @property {BuiltinModel|null} model
 * @property {string|null} problem
 * @property {StarterModel} starter
 * @property {ModelInstall} install
 * @property {string} folder
 */

/**
 * @typedef {Object} Models
 * @property {Array<string>} models
 * @property {string|null} default
 * @property {string} base_url
 */

/**
 * @typedef {Object} MySessions
 * @property {number} sessions
 * @property {number} others
 */

/**
 * @typedef {Object} NewNote
 * @property {string} project
 * @property {string} title
 * @property {string} [body]
 * @property {Array<string>} [tags]
 */

/**
 * @typedef {Object} NewPassword
 * @property {string} password
 */

/**
 * @typedef {Object} NewPerson
 * @property {string} name
 * @property {string} password
 * @property {boolean} [is_admin]
 */

/**
 * @typedef {Object} NewProject
 * @property {string} name
 * @property {string} [style]
 * @property {number} [distill_every]
 */

/**
 * @typedef {Object} NewThread
 * @property {string|null} [title]
 */

/**
 * @typedef {Object} NewToken
 * @property {string} [label]
 * @property {boolean} [read_only]
 */

/**
 * @typedef {Object} NewTokenOut
 * @property {TokenOut} token
 * @property {string} secret
 */

/**
 * @typedef {Object} NoteChanges
 * @property {string|null} [title]
 * @property {string|null} [body]
 * @property {string|null} [base_sha256]
 */

/**
 * @typedef {Object} NoteFull
 * @property {string} id
 * @property {string} project
 * @property {string} name
 * @property {string} title
 * @property {Array<string>} tags
 * @property {string} updated
 * @property {string} body
 * @property {string} html
 * @property {string} sha256
 * @property {Object<string, string|number|boolean|Array<string|number|boolean>>} meta
 */

/**
 * @typedef {Object} NoteKey
 * @property {string} note
 */

/**
 * @typedef {Object} NoteList
 * @property {Array<NoteOut>} notes
 * @property {Array<Problem>} problems
 */

/**
 * @typedef {Object} NoteOut
 * @property {string} id
 * @property {string} project
 * @property {string} name
 * @property {string} title
 * @property {Array<string>} tags
 * @property {string} updated
 */

/**
 * @typedef {Object} Ok
 * @property {boolean} ok
 */

/**
 * @typedef {Object} OneToken
 * @property {TokenOut} token
 */

/**
 * @typedef {Object} PasswordChange
 * @property {string} current
 * @property {string} new
 */

/**
 * @typedef {Object} PasswordReset
 * @property {string} name
 * @property {number} ended_sessions
 */

/**
 * @typedef {Object} People
 * @property {Array<Person>} people
 */

/**
 * @typedef {Object} Person
 * @property {string} name
 * @property {boolean} is_admin
 * @property {boolean} can_sign_in
 * @property {number} sessions
 * @property {boolean} discord
 * @property {boolean} you
 */

/**
 * @typedef {Object} PersonChanges
 * @property {boolean} is_admin
 */

/**
 * @typedef {Object} Pin
 * @property {string} note
 * @property {string} pinned_at
 */

/**
 * A file Charlie could not read, and why.
 * @typedef {Object} Problem
 * @property {string} path
 * @property {string} reason
 */

/**
 * @typedef {Object} ProjectChanges
 * @property {string|null} [name]
 * @property {string|null} [style]
 * @property {string|null} [persona]
 * @property {number|null} [distill_every]
 * @property {number|null} [quotes_window]
 * @property {Array<string>|null} [write_tools]
 */

/**
 * @typedef {Object} ProjectList
 * @property {Array<ProjectOut>} projects
 * @property {Array<Problem>} problems
 */

/**
 * @typedef {Object} ProjectModel
 * @property {string} slug
 * @property {string|null} model
 */

/**
 * @typedef {Object} ProjectOut
 * @property {string} slug
 * @property {string} name
 * @property {string} style
 * @property {string} persona
 * @property {number} distill_every
 * @property {number|null} quotes_window
 * @property {Array<string>|null} write_tools
 * @property {string|null} model
 */

/**
 * A search hit as Charlie's front ends show it: the web API's search results (this is their schema), `charlie search --json` and the MCP tool `search_notes`. `Hit.public` makes it.
 * @typedef {Object} PublicHit
 * @property {string} id
 * @property {string} title
 * @property {string} project
 * @property {string} name
 * @property {number} score
 * @property {number} similarity
 * @property {number|null} vector
 * @property {number|null} bm25
 * @property {Array<string>} terms
 * @property {number} boost
 * @property {Array<string>} boost_causes
 * @property {Array<string>} tags
 * @property {string} snippet
 * @property {string} why
 * @property {string} in_words
 */

/**
 * @typedef {Object} QuoteOut
 * @property {string} speaker
 * @property {string} text
 */

/**
 * @typedef {Object} RecallHitOut
 * @property {number} message_id
 * @property {string} speaker
 * @property {string} role
 * @property {string} time
 * @property {string} text
 * @property {string|null} source_id
 * @property {number} thread
 * @property {number} score
 * @property {string} channel
 * @property {string|null} project
 * @property {boolean|null} in_time
 * @property {string} why
 * @property {Array<SaidOut>} around
 */

/**
 * @typedef {Object} RecallOut
 * @property {string} query
 * @property {string|null} when
 * @property {Array<string>} terms
 * @property {Array<string>} searched
 * @property {boolean} truncated
 * @property {string|null} incomplete
 * @property {Array<RecallHitOut>} results
 */

/**
 * @typedef {Object} Refused
 * @property {string} error
 * @property {string} kind
 */

/**
 * What removing a person deletes and keeps (before: to confirm; after: what it did).
 * @typedef {Object} Removal
 * @property {string} name
 * @property {number} private_threads
 * @property {number} private_messages
 * @property {number} private_memory_revisions
 * @property {number} sessions
 * @property {number} tokens
 * @property {number} usage_events
 * @property {number} discord_links
 * @property {number} shared_messages
 * @property {string} text
 */

/**
 * @typedef {Object} Restore
 * @property {"project"|"note"} kind
 * @property {string} id
 */

/**
 * @typedef {Object} RestoredNote
 * @property {"note"} kind
 * @property {string} id
 * @property {string} title
 */

/**
 * @typedef {Object} RestoredProject
 * @property {"project"} kind
 * @property {string} slug
 * @property {string} name
 */

/**
 * @typedef {Object} RevisionOut
 * @property {number} id
 * @property {string} source
 * @property {string} created_at
 * @property {MemoryOut} memory
 * @property {string} diff
 */

/**
 * A message as recall shows it (the shape `charlie recall --json` prints).
 * @typedef {Object} SaidOut
 * @property {number} message_id
 * @property {string} speaker
 * @property {string} role
 * @property {string} time
 * @property {string} text
 */

/**
 * The data of an answer stream's `saved` event, its first (`/chat`, `/voice` after `heard`, and an edit's): the person's message, stored before the response started, with its id. Not in the OpenAPI schema, which cannot describe an event stream, but in the app's JSDoc types (`STREAM_EVENTS`); the route checks what it sends against it.
 * @typedef {Object} SavedEvent
 * @property {MessageOut} message
 */

/**
 * @typedef {Object} SayRequest
 * @property {string} text
 * @property {boolean} [spoken]
 */

/**
 * @typedef {Object} SearchOut
 * @property {string} query
 * @property {string} mode
 * @property {string|null} fallback_reason
 * @property {boolean} keyword_used
 * @property {Array<string>} terms
 * @property {string|null} incomplete
 * @property {Array<PublicHit>} results
 */

/**
 * @typedef {Object} SignedIn
 * @property {Me} user
 */

/**
 * @typedef {Object} SpeechEngine
 * @property {string} name
 * @property {string} about
 * @property {boolean} online
 * @property {"ready"|"resting"|"unavailable"} state
 * @property {string} detail
 */

/**
 * @typedef {Object} SpeechSurvey
 * @property {Array<SpeechEngine>} engines
 * @property {string|null} speaks
 * @property {string|null} offline
 * @property {string} advice
 */

/**
 * @typedef {Object} StarterModel
 * @property {string} name
 * @property {number} size
 * @property {string} offer
 * @property {boolean} installed
 * @property {number} parts
 * @property {number} downloaded_parts
 */

/**
 * @typedef {Object} SuggestedStep
 * @property {"suggested"} type
 * @property {Array<string>} categories
 */

/**
 * @typedef {Object} TagChanges
 * @property {Array<string>} [add]
 * @property {Array<string>} [remove]
 */

/**
 * @typedef {Object} ThreadChange
 * @property {string|null} [title]
 * @property {boolean|null} [archived]
 */

/**
 * @typedef {Object} ThreadOut
 * @property {number} id
 * @property {string} title
 * @property {string} created_at
 * @property {string} updated_at
 * @property {number} messages
 * @property {string} snippet
 * @property {boolean} archived
 * @property {boolean} deleted
 * @property {string|null} source_id
 */

/**
 * @typedef {Object} TokenOut
 * @property {number} id
 * @property {number} user_id
 * @property {string} user
 * @property {string} label
 * @property {boolean} read_only
 * @property {string} created_at
 * @property {string|null} last_used_at
 * @property {string|null} revoked_at
 * @property {boolean} active
 */

/**
 * @typedef {Object} Tokens
 * @property {Array<TokenOut>} tokens
 */

/**
 * @typedef {Object} ToolCallStep
 * @property {"tool_call"} type
 * @property {string} name
 * @property {Object<string, *>|string} arguments
 * @property {boolean} ok
 * @property {string} summary
 * @property {number} ms
 * @property {boolean} writes
 * @property {"max_iterations"|"ignored_calls"|"bad_arguments"|"duplicate_call"|"unknown_tool"|"write_not_allowed"|"write_refused"|"timeout"|"unreadable_call"|"not_an_answer"|null} guard
 * @property {Array<TraceHit>|null} hits
 * @property {number|null} count
 * @property {"model"|"charlie"} by
 */

/**
 * @typedef {Object} TraceHit
 * @property {string} key
 * @property {string} title
 * @property {number} score
 * @property {string} snippet
 */

/**
 * @typedef {Object} Trash
 * @property {Array<TrashedProject>} projects
 * @property {Array<TrashedNote>} notes
 */

/**
 * @typedef {Object} Trashed
 * @property {TrashedProject|TrashedNote|null} trashed
 */

/**
 * @typedef {Object} TrashedNote
 * @property {"note"} kind
 * @property {string} id
 * @property {string} project
 * @property {string} name
 * @property {string} title
 * @property {string} deleted_at
 */

/**
 * @typedef {Object} TrashedProject
 * @property {"project"} kind
 * @property {string} id
 * @property {string} slug
 * @property {string} name
 * @property {string} deleted_at
 */

/**
 * @typedef {Object} UndoBody
 * @property {number|null} [to]
 */

/**
 * @typedef {Object} Unpinned
 * @property {boolean} ok
 * @property {Array<string>} pins
 */

/**
 * @typedef {Object} Uploaded
 * @property {NoteFull} note
 * @property {string} original
 * @property {string} kind
 * @property {number|null} pages
 * @property {string|null} warning
 * @property {boolean} indexing
 */

/**
 * @typedef {Object} UsageEvent
 * @property {"tag"|"view"} kind
 * @property {string|null} [tag]
 * @property {string|null} [note]
 */

/**
 * @typedef {Object} ValidationError
 * @property {Array<string|number>} loc
 * @property {string} msg
 * @property {string} type
 * @property {*} [input]
 * @property {Object<string, *>} [ctx]
 */

/**
 * @typedef {Object} VoiceStatus
 * @property {boolean} available
 * @property {string|null} problem
 * @property {string} stt_model
 * @property {Object<string, string>} tts
 * @property {SpeechSurvey} speech
 * @property {number} rate
 * @property {number} silence_ms
 * @property {number} max_seconds
 * @property {number} threshold
 * @property {number} spoken_sentences
 */
