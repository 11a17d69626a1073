; Outline patterns for Python. Captures: @definition.<kind> spans the definition, @name is its
; name. A definition found by several patterns keeps the widest span, so decorated ones start
; at their first decorator.

(decorated_definition
  definition: (class_definition name: (identifier) @name)) @definition.class

(decorated_definition
  definition: (function_definition name: (identifier) @name)) @definition.function

(class_definition name: (identifier) @name) @definition.class

; Also `async def`; a def directly inside a class becomes a method.
(function_definition name: (identifier) @name) @definition.function

(type_alias_statement left: (type (identifier) @name)) @definition.type

; Module-level UPPER_CASE names are constants by convention.
(module
  (expression_statement
    (assignment left: (identifier) @name)) @definition.constant
  (#match? @name "^_*[A-Z][A-Z0-9_]*$"))
